package remote

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLimitedBody checks that an answer is read up to the limit and no
// further, whether its size is said beforehand or not.
func TestLimitedBody(t *testing.T) {
	const limit = 8
	for _, tc := range []struct {
		name     string
		body     string
		declared int64
		wantErr  string
	}{
		{"at the limit", "12345678", 8, ""},
		{"at the limit, size not said", "12345678", -1, ""},
		{"size said beyond the limit", "123", 9, "its manifest has 9 bytes, more than 8"},
		{"beyond the limit, size not said", "123456789", -1, "its manifest has more than 8 bytes"},
		{"beyond the limit, size said smaller", "123456789abc", 3, "its manifest has more than 8 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &limitedBody{ReadCloser: io.NopCloser(strings.NewReader(tc.body)), declared: tc.declared, left: limit, limit: limit, what: "its manifest"}
			got, err := io.ReadAll(body)
			switch {
			case tc.wantErr == "" && (err != nil || string(got) != tc.body):
				t.Errorf("read %q, %v; want %q", got, err, tc.body)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("error %v, want %q", err, tc.wantErr)
			case len(got) > limit:
				t.Errorf("read %d bytes, more than %d", len(got), limit)
			}
		})
	}
}

// TestLimitAnswersFollowsRedirects checks that an answer is limited as the
// request that began its redirects says, not as the address the registry
// redirected it to.
func TestLimitAnswersFollowsRedirects(t *testing.T) {
	const limit = 1024
	big := strings.Repeat("x", 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/limited/redirected":
			http.Redirect(w, r, "/open/data", http.StatusTemporaryRedirect)
		case "/open/redirected":
			http.Redirect(w, r, "/limited/data", http.StatusTemporaryRedirect)
		default:
			_, _ = io.WriteString(w, big)
		}
	}))
	defer srv.Close()
	c := &http.Client{Transport: LimitAnswers(http.DefaultTransport, func(first *http.Request) (int64, string) {
		if strings.HasPrefix(first.URL.Path, "/limited/") {
			return limit, "the registry's answer"
		}
		return 0, ""
	})}
	for _, tc := range []struct {
		path    string
		limited bool
	}{
		{"/limited/data", true},
		{"/limited/redirected", true},
		{"/open/data", false},
		{"/open/redirected", false},
	} {
		resp, err := c.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		tooLarge := (*TooLargeError)(nil)
		switch {
		case tc.limited && (!errors.As(err, &tooLarge) || len(got) > limit):
			t.Errorf("%s: read %d bytes (%v), want at most %d and an error saying so", tc.path, len(got), err, limit)
		case tc.limited && tooLarge.Error() != "the registry's answer has more than 1024 bytes":
			t.Errorf("%s: error %q", tc.path, tooLarge)
		case !tc.limited && (err != nil || len(got) != len(big)):
			t.Errorf("%s: read %d bytes (%v), want all %d", tc.path, len(got), err, len(big))
		}
	}
}

func TestPathKind(t *testing.T) {
	for path, want := range map[string]string{
		"/v2/team/app/manifests/v1":               ManifestPath,
		"/v2/app/manifests/sha256:abc":            ManifestPath,
		"/v2/ci/manifests/cache/manifests/latest": ManifestPath,
		"/v2/team/app/blobs/sha256:abc":           BlobPath,
		"/v2/ci/manifests/cache/blobs/sha256:abc": BlobPath,
		"/v2/ci/manifests/cache/tags/list":        TagListPath,
		"/v2/team/blobs/tags/list":                TagListPath,
		"/v2/team/app/blobs/uploads/0b1c":         "",
		"/v2/team/app/manifests/":                 "",
		"/v2/manifests/v1":                        "",
		"/v2/tags/list":                           "",
		"/v2/":                                    "",
		"/elsewhere/team/app/manifests/v1":        "",
		"/v2/team/app/manifests/v1/extra":         "",
		"/v2/team/app/referrers/sha256:abc":       "",
	} {
		if got := PathKind(path); got != want {
			t.Errorf("PathKind(%q) = %q, want %q", path, got, want)
		}
	}
}
