package v1_test

import (
	"strings"
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func TestPodNames(t *testing.T) {
	long := strings.Repeat("a", 70)
	tests := []struct{ name, got, want string }{
		{"classic", buildv1.ClassicPodName("app-1"), "app-1-build"},
		{"platform", buildv1.PlatformPodName("app-1", "linux/arm64"), "app-1-linux-arm64-build"},
		{"platform spelled with its default variant", buildv1.PlatformPodName("app-1", "linux/arm64/v8"), "app-1-linux-arm64-build"},
		{"platform with a variant", buildv1.PlatformPodName("app-1", "linux/arm/v7"), "app-1-linux-arm-v7-build"},
		{"manifest list", buildv1.ManifestListPodName("app-1"), "app-1-manifest-list"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	n := buildv1.PlatformPodName(long, "linux/ppc64le")
	if len(n) > 63 || !strings.HasSuffix(n, "-linux-ppc64le-build") || !strings.HasPrefix(n, "aaaa") {
		t.Errorf("long name %q: want at most 63 characters ending with the platform suffix", n)
	}
	if buildv1.PlatformPodName(long, "linux/ppc64le") == buildv1.PlatformPodName(long+"b", "linux/ppc64le") {
		t.Errorf("two long build names give the same pod name")
	}
	if got := buildv1.LabelValue(long + "-x"); len(got) != 63 {
		t.Errorf("LabelValue length %d, want 63", len(got))
	}
}
