package manifestlist

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/manifest"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func child(platform string, d digest.Digest, mediaType string, config ocispec.Platform) Child {
	return Child{Entry: Entry{Platform: platform, Digest: d}, MediaType: mediaType, Size: 500, Config: config}
}

func TestIndexDescriptors(t *testing.T) {
	oci := ocispec.MediaTypeImageManifest
	tests := []struct {
		name     string
		children []Child
		want     []ocispec.Platform
		wantErr  string
	}{
		{
			name: "sorted by platform, full platform from the config",
			children: []Child{
				child("linux/s390x", fakeDigest("1"), oci, ocispec.Platform{OS: "linux", Architecture: "s390x"}),
				child("linux/arm64", fakeDigest("2"), oci, ocispec.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}),
				child("linux/amd64", fakeDigest("3"), oci, ocispec.Platform{OS: "linux", Architecture: "amd64"}),
				child("linux/ppc64le", fakeDigest("4"), oci, ocispec.Platform{OS: "linux", Architecture: "ppc64le"}),
			},
			want: []ocispec.Platform{
				{OS: "linux", Architecture: "amd64"},
				{OS: "linux", Architecture: "arm64", Variant: "v8"},
				{OS: "linux", Architecture: "ppc64le"},
				{OS: "linux", Architecture: "s390x"},
			},
		},
		{
			name: "os.version and os.features",
			children: []Child{
				child("windows/amd64", fakeDigest("1"), oci, ocispec.Platform{OS: "windows", Architecture: "amd64",
					OSVersion: "10.0.20348.2340", OSFeatures: []string{"win32k"}}),
			},
			want: []ocispec.Platform{{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.2340", OSFeatures: []string{"win32k"}}},
		},
		{
			name: "a variant the config left out comes from the recorded platform, else the requested one",
			children: []Child{
				{Entry: Entry{Platform: "linux/arm", Digest: fakeDigest("1"), Recorded: ocispec.Platform{OS: "linux", Architecture: "arm", Variant: "v6"}},
					MediaType: oci, Size: 500, Config: ocispec.Platform{OS: "linux", Architecture: "arm"}},
				child("linux/arm/v7", fakeDigest("2"), oci, ocispec.Platform{OS: "linux", Architecture: "arm"}),
				child("linux/amd64/v3", fakeDigest("3"), oci, ocispec.Platform{OS: "linux", Architecture: "amd64"}),
			},
			want: []ocispec.Platform{
				{OS: "linux", Architecture: "amd64", Variant: "v3"},
				{OS: "linux", Architecture: "arm", Variant: "v6"},
				{OS: "linux", Architecture: "arm", Variant: "v7"},
			},
		},
		{
			name: "same os and arch, different os.version, sorted",
			children: []Child{
				child("windows/amd64", fakeDigest("1"), oci, ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: "10.0.2"}),
				child("windows/amd64", fakeDigest("2"), oci, ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: "10.0.1"}),
			},
			want: []ocispec.Platform{
				{OS: "windows", Architecture: "amd64", OSVersion: "10.0.1"},
				{OS: "windows", Architecture: "amd64", OSVersion: "10.0.2"},
			},
		},
		{
			name: "one platform twice",
			children: []Child{
				child("linux/arm64", fakeDigest("1"), oci, ocispec.Platform{OS: "linux", Architecture: "arm64"}),
				child("linux/arm64/v8", fakeDigest("2"), oci, ocispec.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}),
			},
			wantErr: "platforms linux/arm64 and linux/arm64/v8 are both images for linux/arm64",
		},
		{
			name:     "a child that is a list",
			children: []Child{child("linux/amd64", fakeDigest("1"), ocispec.MediaTypeImageIndex, ocispec.Platform{OS: "linux", Architecture: "amd64"})},
			wantErr:  "not an image manifest",
		},
		{
			name:     "a schema 1 child",
			children: []Child{child("linux/amd64", fakeDigest("1"), manifest.DockerV2Schema1SignedMediaType, ocispec.Platform{OS: "linux", Architecture: "amd64"})},
			wantErr:  "not an image manifest",
		},
		{name: "no children", wantErr: "at least one image"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			descs, err := IndexDescriptors(tt.children)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || ReasonOf(err) != buildv1.StatusReasonManifestListFailed {
					t.Fatalf("IndexDescriptors = %v, %v; want ManifestListFailed %q", descs, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []ocispec.Platform
			for _, d := range descs {
				got = append(got, *d.Platform)
				if d.Size != 500 || d.MediaType != oci {
					t.Errorf("descriptor %+v lost the size or media type", d)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("platforms = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestBuildIndex(t *testing.T) {
	oci, docker := ocispec.MediaTypeImageManifest, manifest.DockerV2Schema2MediaType
	amd := ocispec.Platform{OS: "linux", Architecture: "amd64"}
	arm := ocispec.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}

	t.Run("OCI children give an OCI index", func(t *testing.T) {
		list, mediaType, err := BuildIndex([]Child{child("linux/arm64", fakeDigest("2"), oci, arm), child("linux/amd64", fakeDigest("1"), oci, amd)})
		if err != nil || mediaType != ocispec.MediaTypeImageIndex {
			t.Fatalf("BuildIndex = %s, %v", mediaType, err)
		}
		var index ocispec.Index
		if err := json.Unmarshal(list, &index); err != nil {
			t.Fatal(err)
		}
		if index.SchemaVersion != 2 || index.MediaType != ocispec.MediaTypeImageIndex || len(index.Manifests) != 2 ||
			index.Manifests[0].Digest != fakeDigest("1") || index.Manifests[1].Platform.Variant != "v8" {
			t.Fatalf("index = %s", list)
		}
		if got := manifest.GuessMIMEType(list); got != ocispec.MediaTypeImageIndex {
			t.Errorf("a registry would see %q", got)
		}
	})

	t.Run("Docker schema 2 children give a Docker manifest list", func(t *testing.T) {
		list, mediaType, err := BuildIndex([]Child{child("linux/amd64", fakeDigest("1"), docker, amd), child("linux/arm64", fakeDigest("2"), docker, arm)})
		if err != nil || mediaType != manifest.DockerV2ListMediaType {
			t.Fatalf("BuildIndex = %s, %v", mediaType, err)
		}
		parsed, err := manifest.Schema2ListFromManifest(list)
		if err != nil {
			t.Fatal(err)
		}
		if len(parsed.Manifests) != 2 || parsed.Manifests[1].Platform.Variant != "v8" || parsed.Manifests[0].MediaType != docker {
			t.Fatalf("list = %s", list)
		}
		if got := manifest.GuessMIMEType(list); got != manifest.DockerV2ListMediaType {
			t.Errorf("a registry would see %q", got)
		}
	})

	t.Run("mixed children give an OCI index", func(t *testing.T) {
		_, mediaType, err := BuildIndex([]Child{child("linux/amd64", fakeDigest("1"), docker, amd), child("linux/arm64", fakeDigest("2"), oci, arm)})
		if err != nil || mediaType != ocispec.MediaTypeImageIndex {
			t.Fatalf("BuildIndex = %s, %v", mediaType, err)
		}
	})

	t.Run("the order of the children does not change the digest", func(t *testing.T) {
		a, _, err1 := BuildIndex([]Child{child("linux/amd64", fakeDigest("1"), oci, amd), child("linux/arm64", fakeDigest("2"), oci, arm)})
		b, _, err2 := BuildIndex([]Child{child("linux/arm64", fakeDigest("2"), oci, arm), child("linux/amd64", fakeDigest("1"), oci, amd)})
		if err1 != nil || err2 != nil || digest.FromBytes(a) != digest.FromBytes(b) {
			t.Fatalf("digests differ: %s vs %s (%v, %v)", a, b, err1, err2)
		}
	})
}
