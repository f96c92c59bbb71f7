package image

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"

	regremote "github.com/archway-build/archway/pkg/registry/remote"
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

// TestLimitManifests checks that a cached result's reads limit the
// distribution API's manifest answers, and only those.
func TestLimitManifests(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		limited      bool
	}{
		{http.MethodGet, "/v2/team/app/manifests/latest", true},
		{http.MethodGet, "/v2/team/app/manifests/sha256:abc", true},
		{http.MethodGet, "/v2/ci/manifests/cache/manifests/latest", true},
		{http.MethodGet, "/v2/ci/manifests/cache/blobs/sha256:abc", false},
		{http.MethodGet, "/v2/team/app/blobs/sha256:abc", false},
		{http.MethodGet, "/v2/team/app/manifests/", false},
		{http.MethodGet, "/elsewhere/team/app/manifests/latest", false},
		{http.MethodPut, "/v2/team/app/manifests/latest", false},
	} {
		limit, what := limitManifests(httptest.NewRequest(tc.method, tc.path, nil))
		switch {
		case tc.limited && (limit != regremote.MaxManifestSize || what != "its manifest"):
			t.Errorf("%s %s: limit %d (%q), want %d (%q)", tc.method, tc.path, limit, what, regremote.MaxManifestSize, "its manifest")
		case !tc.limited && limit != 0:
			t.Errorf("%s %s: limit %d, want none", tc.method, tc.path, limit)
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
