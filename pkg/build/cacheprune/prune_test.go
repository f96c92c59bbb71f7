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
	regremote "github.com/archway-build/archway/pkg/registry/remote"
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

// TestLimits checks that every answer a prune reads is bounded, by what
// its request asks for: one at an address the registry chose (a Link
// header's next page) by the largest limit.
func TestLimits(t *testing.T) {
	for path, want := range map[string]struct {
		limit int64
		what  string
	}{
		"/v2/team/app-cache/manifests/" + strings.Repeat("a", 64): {regremote.MaxManifestSize, "the registry's manifest"},
		"/v2/team/app-cache/blobs/sha256:abc":                     {regremote.MaxConfigSize, "the registry's config"},
		"/v2/team/app-cache/tags/list":                            {MaxTagListPageSize, "the registry's tag list page"},
		"/elsewhere/next-page":                                    {max(regremote.MaxManifestSize, regremote.MaxConfigSize, MaxTagListPageSize), "the registry's answer"},
		// A repository may have a component called manifests.
		"/v2/ci/manifests/cache/blobs/sha256:abc": {regremote.MaxConfigSize, "the registry's config"},
		"/v2/ci/manifests/cache/tags/list":        {MaxTagListPageSize, "the registry's tag list page"},
	} {
		if limit, what := limits(httptest.NewRequest(http.MethodGet, path, nil)); limit != want.limit || what != want.what {
			t.Errorf("%s: limit %d (%q), want %d (%q)", path, limit, what, want.limit, want.what)
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
