package image

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

func sortedList(s sets.Set[string]) []string { return sets.List(s) }

func TestPlatformsFromIndex(t *testing.T) {
	tests := []struct {
		name, index string
		mimeType    string
		want        string
		linux       string
	}{
		{
			name:  "oci index with attestations",
			index: `{"manifests":[{"platform":{"os":"linux","architecture":"arm64","variant":"v8"}},{"platform":{"os":"linux","architecture":"s390x"}},{"platform":{"os":"unknown","architecture":"unknown"},"annotations":{"vnd.docker.reference.type":"attestation-manifest"}}]}`,
			want:  "[linux/arm64 linux/s390x]",
			linux: "[arm64 s390x]",
		},
		{
			name:  "attestation annotated with a real platform is skipped",
			index: `{"manifests":[{"platform":{"os":"linux","architecture":"amd64"},"annotations":{"vnd.docker.reference.type":"attestation-manifest"}},{"platform":{"os":"linux","architecture":"ppc64le"}}]}`,
			want:  "[linux/ppc64le]",
			linux: "[ppc64le]",
		},
		{
			name:  "windows amd64 does not make a linux amd64",
			index: `{"manifests":[{"platform":{"os":"windows","architecture":"amd64","os.version":"10.0.17763.1"}},{"platform":{"os":"linux","architecture":"arm64"}}]}`,
			want:  "[linux/arm64 windows/amd64]",
			linux: "[arm64]",
		},
		{
			name:  "entries without a platform are skipped",
			index: `{"manifests":[{"digest":"sha256:00"},{"platform":{"os":"linux","architecture":"amd64"}},{"platform":{"os":"linux","architecture":"amd64","variant":"v3"}}]}`,
			want:  "[linux/amd64]",
			linux: "[amd64]",
		},
		{
			name:     "docker manifest list",
			mimeType: "application/vnd.docker.distribution.manifest.list.v2+json",
			index:    `{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json","manifests":[{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","digest":"sha256:` + strings.Repeat("a", 64) + `","size":1,"platform":{"os":"linux","architecture":"arm","variant":"v7"}},{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","digest":"sha256:` + strings.Repeat("b", 64) + `","size":1,"platform":{"os":"linux","architecture":"amd64"}}]}`,
			want:     "[linux/amd64 linux/arm]",
			linux:    "[amd64 arm]",
		},
		{
			name:  "empty index",
			index: `{"manifests":[]}`,
			want:  "[]",
			linux: "[]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PlatformsFromIndex([]byte(tt.index), tt.mimeType)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("platforms = %v, want %s", got, tt.want)
			}
			if linux := fmt.Sprint(sortedList(got.Architectures(""))); linux != tt.linux {
				t.Errorf("linux architectures = %s, want %s", linux, tt.linux)
			}
		})
	}
	if _, err := PlatformsFromIndex([]byte("{"), ""); err == nil {
		t.Error("want an error for a broken index")
	}
}

func TestPlatformFromConfig(t *testing.T) {
	if got := fmt.Sprint(PlatformFromConfig("linux", "amd64")); got != "[linux/amd64]" {
		t.Errorf("got %s", got)
	}
	if got := PlatformFromConfig("", "amd64"); len(got) != 0 {
		t.Errorf("an image without an OS has no platform, got %v", got)
	}
	if got := PlatformFromConfig("windows", "amd64").Architectures("linux"); got.Len() != 0 {
		t.Errorf("a windows image has no linux architecture, got %v", got)
	}
}

// TestFirstImage: the image whose config says whether an index is an
// operator bundle is its first runnable entry.
func TestFirstImage(t *testing.T) {
	a, b := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	tests := []struct {
		name, index, mimeType, want string
	}{
		{"first entry", `{"manifests":[{"digest":"` + a + `","platform":{"os":"linux","architecture":"arm64"}},{"digest":"` + b + `","platform":{"os":"linux","architecture":"amd64"}}]}`, "", a},
		{"attestation and platformless entries skipped", `{"manifests":[{"digest":"` + a + `","platform":{"os":"unknown","architecture":"unknown"},"annotations":{"vnd.docker.reference.type":"attestation-manifest"}},{"digest":"` + b + `","platform":{"os":"linux","architecture":"amd64"}}]}`, "", b},
		{"no image", `{"manifests":[{"digest":"` + a + `"}]}`, "", ""},
		{"docker manifest list", `{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json","manifests":[{"mediaType":"application/vnd.docker.distribution.manifest.v2+json","digest":"` + b + `","size":1,"platform":{"os":"linux","architecture":"s390x"}}]}`, "application/vnd.docker.distribution.manifest.list.v2+json", b},
	}
	for _, tt := range tests {
		got, err := firstImage([]byte(tt.index), tt.mimeType)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: firstImage = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}
