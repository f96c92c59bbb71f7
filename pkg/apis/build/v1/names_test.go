package v1_test

import (
	"strings"
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
)

func TestPodNames(t *testing.T) {
	long := strings.Repeat("a", 250)
	tests := []struct{ name, got, want string }{
		{"classic", buildv1.ClassicPodName("app-1"), "app-1-build"},
		{"platform", buildv1.PlatformPodName("app-1", "linux/arm64"), "app-1-build-linux-arm64"},
		{"platform spelled with its default variant", buildv1.PlatformPodName("app-1", "linux/arm64/v8"), "app-1-build-linux-arm64"},
		{"platform with a variant", buildv1.PlatformPodName("app-1", "linux/arm/v7"), "app-1-build-linux-arm-v7"},
		{"manifest list", buildv1.ManifestListPodName("app-1"), "app-1-manifest-list"},
		{"a name of 70 characters is kept whole", buildv1.ClassicPodName(long[:70]), long[:70] + "-build"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	n := buildv1.PlatformPodName(long, "linux/ppc64le")
	if len(n) > 253 || !strings.HasPrefix(n, "aaaa") {
		t.Errorf("long name %q: want at most 253 characters", n)
	}
	if buildv1.PlatformPodName(long, "linux/ppc64le") == buildv1.PlatformPodName(long+"b", "linux/ppc64le") {
		t.Errorf("two long build names give the same pod name")
	}
	if got := buildv1.LabelValue(long + "-x"); len(got) != 63 {
		t.Errorf("LabelValue length %d, want 63", len(got))
	}
}

// TestPodNamesCollisionFree: no two pods of different Builds (or two pods
// of one Build) get the same name, for Build names chosen to collide with
// another Build's pods: each is another Build's name followed by a pod
// suffix, long names included.
func TestPodNamesCollisionFree(t *testing.T) {
	// Every platform once (linux/arm is linux/arm/v7).
	var platforms []string
	seenPlatform := map[string]bool{}
	for _, arch := range platform.KnownArchitectures() {
		for _, p := range []string{"linux/" + arch, "windows/" + arch, "linux/arm/v6"} {
			if parsed, err := platform.Parse(p); err == nil && !seenPlatform[parsed.NameSuffix()] {
				seenPlatform[parsed.NameSuffix()] = true
				platforms = append(platforms, p)
			}
		}
	}
	pods := func(build string) []string {
		out := []string{buildv1.ClassicPodName(build), buildv1.ManifestListPodName(build)}
		for _, p := range platforms {
			out = append(out, buildv1.PlatformPodName(build, p))
		}
		return out
	}
	builds := []string{"a", "a.b", strings.Repeat("x", 200), strings.Repeat("x", 240), strings.Repeat("x", 253)}
	// Names built to collide: a Build's name plus a suffix another pod
	// name adds, and the pod names themselves.
	for _, b := range slicesClone(builds) {
		for _, pod := range pods(b) {
			builds = append(builds, pod, strings.TrimSuffix(pod, "-build"), strings.TrimSuffix(pod, "-manifest-list"))
		}
		for _, p := range platforms {
			slug := strings.TrimPrefix(buildv1.PlatformPodName("z", p), "z-build-")
			builds = append(builds, b+"-"+slug, b+"-build-"+slug, b+"-"+slug+"-build")
		}
	}
	owner := map[string]string{}
	for _, b := range builds {
		if len(b) > 253 {
			continue
		}
		for _, pod := range pods(b) {
			if other, taken := owner[pod]; taken && other != b {
				t.Errorf("pod name %q is both Build %q's and Build %q's", pod, other, b)
			}
			owner[pod] = b
		}
		if seen := map[string]bool{}; true {
			for _, pod := range pods(b) {
				if seen[pod] {
					t.Errorf("Build %q has two pods named %q", b, pod)
				}
				seen[pod] = true
			}
		}
	}
	if len(owner) < 1000 {
		t.Fatalf("only %d pod names checked", len(owner))
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }
