package imagebuild

import (
	"io"
	"strings"
	"testing"

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
