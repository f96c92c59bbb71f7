package imagebuild

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
)

// TestCheckCachedLayers checks that a cached result's layers must be of its
// format's rootfs types and name no URLs: a push leaves other layers out
// and a pull fetches them from wherever the manifest says.
func TestCheckCachedLayers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		format  Format
		layer   v1.Descriptor
		wantErr string
	}{
		{"OCI gzip", FormatOCI, v1.Descriptor{MediaType: ggcrtypes.OCILayer}, ""},
		{"OCI zstd", FormatOCI, v1.Descriptor{MediaType: ggcrtypes.OCILayerZStd}, ""},
		{"Docker gzip", FormatDocker, v1.Descriptor{MediaType: ggcrtypes.DockerLayer}, ""},
		{"URLs", FormatOCI, v1.Descriptor{MediaType: ggcrtypes.OCILayer, URLs: []string{"https://example.com/l"}}, "names URLs"},
		{"non-distributable", FormatOCI, v1.Descriptor{MediaType: ggcrtypes.OCIRestrictedLayer}, "not a oci build's layer"},
		{"foreign", FormatDocker, v1.Descriptor{MediaType: ggcrtypes.DockerForeignLayer}, "not a docker build's layer"},
		{"Docker layer in an OCI image", FormatOCI, v1.Descriptor{MediaType: ggcrtypes.DockerLayer}, "not a oci build's layer"},
		{"a config as a layer", FormatOCI, v1.Descriptor{MediaType: ggcrtypes.OCIConfigJSON}, "not a oci build's layer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkCachedLayers(tc.format, []v1.Descriptor{{MediaType: ggcrtypes.OCILayer}, tc.layer})
			if tc.format == FormatDocker {
				err = checkCachedLayers(tc.format, []v1.Descriptor{{MediaType: ggcrtypes.DockerLayer}, tc.layer})
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}

// TestLimitedBody checks that a manifest answer is read up to the limit
// and no further, whether its size is said beforehand or not.
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
			body := &limitedBody{ReadCloser: io.NopCloser(strings.NewReader(tc.body)), size: tc.declared, left: limit, limit: limit}
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

// TestLimitManifestsFollowsRedirects checks that a manifest answer is
// limited when the registry redirects it elsewhere, and that only the
// distribution API's manifest paths are limited.
func TestLimitManifestsFollowsRedirects(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/manifests/redirected"):
			http.Redirect(w, r, "/elsewhere/data", http.StatusTemporaryRedirect)
		default:
			_, _ = io.WriteString(w, big)
		}
	}))
	defer srv.Close()
	c := &http.Client{Transport: limitManifests{inner: http.DefaultTransport, limit: 1024}}
	for _, tc := range []struct {
		path    string
		limited bool
	}{
		{"/v2/team/app/manifests/redirected", true},
		{"/v2/team/app/manifests/sha256:abc", true},
		{"/v2/ci/manifests/cache/blobs/sha256:abc", false},
		{"/v2/ci/manifests/cache/manifests/latest", true},
		{"/v2/team/app/blobs/sha256:abc", false},
	} {
		resp, err := c.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		switch {
		case tc.limited && (err == nil || len(got) > 1024):
			t.Errorf("%s: read %d bytes (%v), want at most 1024 and an error", tc.path, len(got), err)
		case !tc.limited && (err != nil || len(got) != len(big)):
			t.Errorf("%s: read %d bytes (%v), want all %d", tc.path, len(got), err, len(big))
		}
	}
}

// TestCheckLayerNeedsItsSize checks that a layer whose size the cache
// repository does not say (a HEAD without Content-Length) is refused, as
// one of another size is.
func TestCheckLayerNeedsItsSize(t *testing.T) {
	const d = "sha256:" + "ab" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"
	for _, tc := range []struct {
		name    string
		length  string
		wantErr string
	}{
		{"size said", "10", ""},
		{"another size", "11", "has 11 bytes in the cache repository, its manifest says 10"},
		{"size not said", "", "does not say its size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v2/" {
					return
				}
				w.Header().Set("Docker-Content-Digest", d)
				if tc.length != "" {
					w.Header().Set("Content-Length", tc.length)
				} else {
					// Without a length, Go's server says none only
					// for a chunked answer.
					w.Header().Set("Transfer-Encoding", "chunked")
				}
				w.WriteHeader(http.StatusOK)
			}))
			defer srv.Close()
			ref, err := name.NewDigest(strings.TrimPrefix(srv.URL, "http://")+"/team/app-cache@"+d, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			r := &cachedResult{ref: ref}
			err = r.checkLayer(t.Context(), 1, v1.Descriptor{Digest: v1.Hash{Algorithm: "sha256", Hex: d[len("sha256:"):]}, Size: 10})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}
