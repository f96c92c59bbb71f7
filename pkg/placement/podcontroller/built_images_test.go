package podcontroller

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

const builtDigest = "sha256:4d8f4e1b7a3c2e6b9f0a1d2c3b4a59687766554433221100ffeeddccbbaa9988"

func completedBuild(mutate ...func(*buildv1.Build)) *buildv1.Build {
	b := &buildv1.Build{
		ObjectMeta: metav1.ObjectMeta{Name: "app-1", Namespace: "team", Labels: map[string]string{"buildconfig": "app"}},
		Spec: buildv1.BuildSpec{CommonSpec: buildv1.CommonSpec{
			Output: buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/team/app:v1"}},
		}},
		Status: buildv1.BuildStatus{
			Phase:      buildv1.BuildPhaseComplete,
			Message:    "a long message the cache does not keep",
			Output:     buildv1.BuildStatusOutput{To: &buildv1.BuildStatusOutputTo{ImageDigest: builtDigest}},
			LogSnippet: "log",
			Platforms: []buildv1.BuildStatusPlatform{
				{Platform: "linux/amd64", Phase: buildv1.BuildPhaseComplete, PodName: "p1",
					Output: &buildv1.BuildStatusPlatformOutput{ImageDigest: "sha256:aa", OS: "linux", Architecture: "amd64"}},
				{Platform: "linux/arm64/v8", Phase: buildv1.BuildPhaseComplete,
					Output: &buildv1.BuildStatusPlatformOutput{OS: "linux", Architecture: "arm64", Variant: "v8"}},
				{Platform: "linux/s390x", Phase: buildv1.BuildPhaseFailed},
				{Platform: "linux/ppc64le", Phase: buildv1.BuildPhaseComplete, Output: &buildv1.BuildStatusPlatformOutput{ImageDigest: "sha256:bb"}},
			},
		},
	}
	for _, m := range mutate {
		m(b)
	}
	return b
}

func TestBuildPlatformsAndIndexes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		build     *buildv1.Build
		platforms string
		repo      []string
		digest    []string
	}{
		{
			name: "completed: its completed platforms (the failed one left out), indexed by repository and digest", build: completedBuild(),
			platforms: "[linux/amd64 linux/arm64 linux/ppc64le]",
			repo:      []string{"registry.example.com/team/app"}, digest: []string{"registry.example.com/team/app@" + builtDigest},
		},
		{
			name: "still running: nothing", build: completedBuild(func(b *buildv1.Build) { b.Status.Phase = buildv1.BuildPhaseRunning }),
			platforms: "[]",
		},
		{
			name: "failed: nothing", build: completedBuild(func(b *buildv1.Build) { b.Status.Phase = buildv1.BuildPhaseFailed }),
			platforms: "[]",
		},
		{
			name: "no digest: not indexed", build: completedBuild(func(b *buildv1.Build) { b.Status.Output.To = nil }),
			platforms: "[linux/amd64 linux/arm64 linux/ppc64le]",
		},
		{
			name: "a malformed digest: not indexed", build: completedBuild(func(b *buildv1.Build) { b.Status.Output.To.ImageDigest = "sha256:zz" }),
			platforms: "[linux/amd64 linux/arm64 linux/ppc64le]",
		},
		{
			name: "an ImageStreamTag output: not indexed", build: completedBuild(func(b *buildv1.Build) { b.Spec.Output.To.Kind = "ImageStreamTag" }),
			platforms: "[linux/amd64 linux/arm64 linux/ppc64le]",
		},
		{
			name: "a short name is normalized", build: completedBuild(func(b *buildv1.Build) { b.Spec.Output.To.Name = "app" }),
			platforms: "[linux/amd64 linux/arm64 linux/ppc64le]",
			repo:      []string{"docker.io/library/app"}, digest: []string{"docker.io/library/app@" + builtDigest},
		},
		{
			name: "a single-platform build records no platforms", build: completedBuild(func(b *buildv1.Build) { b.Status.Platforms = nil }),
			platforms: "[]",
			repo:      []string{"registry.example.com/team/app"}, digest: []string{"registry.example.com/team/app@" + builtDigest},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(buildPlatforms(tc.build)); got != tc.platforms {
				t.Errorf("platforms %s, want %s", got, tc.platforms)
			}
			if got := indexBuildOutputRepository(tc.build); fmt.Sprint(got) != fmt.Sprint(tc.repo) {
				t.Errorf("repository index %v, want %v", got, tc.repo)
			}
			if got := indexBuildOutputDigest(tc.build); fmt.Sprint(got) != fmt.Sprint(tc.digest) {
				t.Errorf("digest index %v, want %v", got, tc.digest)
			}
			// The cache keeps what the answer needs: same platforms and
			// indexes from the narrowed copy.
			obj, err := builtOutput(tc.build)
			if err != nil {
				t.Fatal(err)
			}
			narrow := obj.(*buildv1.Build)
			if got, want := fmt.Sprint(buildPlatforms(narrow)), fmt.Sprint(buildPlatforms(tc.build)); len(tc.digest) > 0 && got != want {
				t.Errorf("narrowed platforms %s, want %s", got, want)
			}
			if fmt.Sprint(indexBuildOutputDigest(narrow)) != fmt.Sprint(tc.digest) {
				t.Errorf("narrowed digest index %v, want %v", indexBuildOutputDigest(narrow), tc.digest)
			}
			if narrow.Status.Message != "" || narrow.Status.LogSnippet != "" || narrow.Labels != nil {
				t.Errorf("the narrowed Build keeps more than it needs: %+v", narrow)
			}
		})
	}
}
