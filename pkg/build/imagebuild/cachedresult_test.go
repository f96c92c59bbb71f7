package imagebuild

import (
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
