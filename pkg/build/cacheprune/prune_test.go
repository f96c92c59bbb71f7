package cacheprune

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/archway-build/archway/pkg/registry"
)

func TestIsCacheTag(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	for tag, want := range map[string]bool{
		hex:                    true,
		"result-" + hex:        true,
		strings.ToUpper(hex):   false,
		hex[:63]:               false,
		hex + "0":              false,
		"result-" + hex[:63]:   false,
		"results-" + hex:       false,
		"latest":               false,
		"v1-" + hex:            false,
		hex[:63] + "g":         false,
		"result-" + hex + "\n": false,
	} {
		if got := IsCacheTag(tag); got != want {
			t.Errorf("IsCacheTag(%q) = %v, want %v", tag, got, want)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := (Options{KeepYoungerThan: -time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative duration: %v", err)
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero: %v", err)
	}
}

func TestLimitedBody(t *testing.T) {
	read := func(body string, declared, limit int64) (string, error) {
		b := &limitedBody{ReadCloser: io.NopCloser(strings.NewReader(body)), declared: declared, left: limit, limit: limit, what: "manifest"}
		data, err := io.ReadAll(b)
		return string(data), err
	}
	if got, err := read("abcd", 4, 4); err != nil || got != "abcd" {
		t.Errorf("at the limit: %q, %v", got, err)
	}
	if _, err := read("abcde", -1, 4); err == nil || !strings.Contains(err.Error(), "more than 4 bytes") {
		t.Errorf("over the limit, size unsaid: %v", err)
	}
	if _, err := read("ab", 5, 4); err == nil || !strings.Contains(err.Error(), "has 5 bytes, more than 4") {
		t.Errorf("declared over the limit: %v", err)
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]Repository{{Error: "x"}, {Tags: []Tag{{Action: Removed}, {Action: Kept}, {Action: Failed}, {Action: WouldRemove}}}})
	if s != (Summary{Removed: 1, WouldRemove: 1, Kept: 1, Failed: 1, FailedRepositories: 1}) || s.Err() == nil {
		t.Errorf("summary %+v, %v", s, s.Err())
	}
	if err := Summarize([]Repository{{Tags: []Tag{{Action: Kept}}}}).Err(); err != nil {
		t.Errorf("no failure: %v", err)
	}
}

// TestWriteTableEscapes: a hostile registry's tag names and messages reach
// the table quoted, never as terminal control sequences.
func TestWriteTableEscapes(t *testing.T) {
	var out strings.Builder
	err := WriteTable(&out, []Repository{{Repository: "r", Tags: []Tag{
		{Tag: "evil\x1b]0;owned\x07", Action: Kept, Reason: "not a cache tag"},
		{Tag: strings.Repeat("a", 64), Action: Kept, Reason: "its manifest could not be read: \x1b[2Jgone"},
	}}}, time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out.String(), "\x1b\x07") {
		t.Errorf("control characters in the table:\n%q", out.String())
	}
	if !strings.Contains(out.String(), `"evil\x1b]0;owned\a"`) {
		t.Errorf("tag not quoted:\n%s", out.String())
	}
}

// TestLimitsFollowRedirects checks that a redirected answer is bounded as
// the request that began it, and that an answer at an address the registry
// chose (a Link header's next page) is bounded too.
func TestLimitsFollowRedirects(t *testing.T) {
	big := strings.Repeat("x", MaxTagListPageSize+1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/manifests/redirected"), strings.HasSuffix(r.URL.Path, "/tags/list"):
			http.Redirect(w, r, "/elsewhere/data", http.StatusTemporaryRedirect)
		default:
			_, _ = io.WriteString(w, big)
		}
	}))
	defer srv.Close()
	c := &http.Client{Transport: limits{inner: http.DefaultTransport}}
	for path, limit := range map[string]int{
		"/v2/team/app-cache/manifests/redirected": MaxManifestSize,
		"/v2/team/app-cache/tags/list":            MaxTagListPageSize,
		"/elsewhere/next-page":                    max(MaxManifestSize, MaxConfigSize, MaxTagListPageSize),
	} {
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err == nil || len(got) > limit {
			t.Errorf("%s: read %d bytes (%v), want at most %d and an error", path, len(got), err, limit)
		}
	}
}

// TestPruneAges prunes an in-memory registry's cache repository whose
// images were created at the edges of the cut-off: only the one created
// before it is removed; one at it, one in the future and one that records
// no created time are kept, each said why.
func TestPruneAges(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	repo := host + "/team/app-cache-linux-amd64"
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	keep := 24 * time.Hour
	tags := map[string]time.Time{
		strings.Repeat("a", 64): now.Add(-keep - time.Second),
		strings.Repeat("b", 64): now.Add(-keep),
		strings.Repeat("c", 64): now.Add(time.Hour),
		strings.Repeat("d", 64): {},
	}
	for tag, created := range tags {
		img, err := mutate.CreatedAt(empty.Image, v1.Time{Time: created})
		if err != nil {
			t.Fatal(err)
		}
		if created.IsZero() {
			cfg, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			cfg.Created = v1.Time{}
			if img, err = mutate.ConfigFile(img, cfg); err != nil {
				t.Fatal(err)
			}
		}
		ref, err := name.NewTag(repo+":"+tag, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Prune(t.Context(), []string{repo}, Options{
		Access: registry.Access{InsecureRegistries: []string{host}}, KeepYoungerThan: keep, Confirm: true, Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		strings.Repeat("a", 64): string(Removed),
		strings.Repeat("b", 64): string(Kept) + ": younger than 24h0m0s",
		strings.Repeat("c", 64): string(Kept) + ": younger than 24h0m0s",
		strings.Repeat("d", 64): string(Kept) + ": its config records no created time: left alone",
	}
	got := map[string]string{}
	for _, r := range res {
		if r.Error != "" {
			t.Fatalf("%s: %s", r.Repository, r.Error)
		}
		for _, tag := range r.Tags {
			got[tag.Tag] = string(tag.Action)
			if tag.Reason != "" {
				got[tag.Tag] += ": " + tag.Reason
			}
		}
	}
	for tag, w := range want {
		if got[tag] != w {
			t.Errorf("%s...: %q, want %q", tag[:8], got[tag], w)
		}
	}
}
