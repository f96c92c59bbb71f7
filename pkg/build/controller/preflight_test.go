package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
)

func TestBaseImages(t *testing.T) {
	from := func(name string) *corev1.ObjectReference {
		return &corev1.ObjectReference{Kind: "DockerImage", Name: name}
	}
	tests := []struct {
		name       string
		dockerfile string
		from       *corev1.ObjectReference
		want       []string
		wantKnown  bool
	}{
		{name: "neither: not known"},
		{name: "from alone (the Dockerfile is in the source)", from: from("r/base:1"), want: []string{"r/base:1"}, wantKnown: true},
		{name: "from of another kind: not known", from: &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "base:1"}},
		{name: "inline: the FROMs of the stages the last needs, once",
			dockerfile: "FROM r/a:1 AS build\nRUN x\nFROM r/b:2\nCOPY --from=build / /\nFROM r/b:2\nCOPY --from=build / /\nRUN --mount=type=bind,from=1,target=/m x\n",
			want:       []string{"r/a:1", "r/b:2"}, wantKnown: true},
		{name: "stages the last does not need are left out (buildah skips them)",
			dockerfile: "FROM r/gpu:1 AS gpu\nRUN x\nFROM r/a:1 AS build\nFROM r/b:2\nCOPY --from=gpu / /\nfrom r/a:1\n",
			want:       []string{"r/a:1"}, wantKnown: true},
		{name: "stage names, scratch and --platform FROMs are left out",
			dockerfile: "FROM --platform=linux/amd64 r/tools:1 AS tools\nFROM r/a:1 AS base\nFROM base\nCOPY --from=tools /t /t\nFROM scratch\nCOPY --from=2 /x /x\n",
			want:       []string{"r/a:1"}, wantKnown: true},
		{name: "a build arg in any FROM: not known", dockerfile: "ARG V=1\nFROM r/a:$V\nFROM r/b:2\n"},
		{name: "from replaces the last FROM", dockerfile: "FROM r/a:1 AS build\nFROM r/b:2\nCOPY --from=build /x /x\n", from: from("r/c:3"),
			want: []string{"r/a:1", "r/c:3"}, wantKnown: true},
		{name: "from replaces a last FROM that had an arg", dockerfile: "FROM r/a:1\nFROM r/b:${V}\n", wantKnown: false},
		{name: "only scratch: nothing to check", dockerfile: "FROM scratch\nCOPY x /\n"},
		{name: "stage names are matched exactly, as buildah and the builder match them",
			dockerfile: "FROM r/gpu:1 AS GPU\nFROM r/b:2\nCOPY --from=gpu / /\n",
			want:       []string{"r/b:2"}, wantKnown: true},
		{name: "a FROM may name a stage by its index",
			dockerfile: "FROM r/a:1\nRUN x\nFROM 0\n",
			want:       []string{"r/a:1"}, wantKnown: true},
		{name: "a quoted image is not written out: not known", dockerfile: "FROM \"r/a:1\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := makeBuild("app").obj()
			b.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{From: tt.from}
			if tt.dockerfile != "" {
				b.Spec.Source.Dockerfile = &tt.dockerfile
			}
			got, known := BaseImages(b)
			if diff := cmp.Diff(tt.want, got); diff != "" || known != tt.wantKnown {
				t.Errorf("known %v (want %v), images (-want +got):\n%s", known, tt.wantKnown, diff)
			}
		})
	}
}

// TestBaseImagesSource: a Source build's base is its builder image.
func TestBaseImagesSource(t *testing.T) {
	got, known := BaseImages(makeBuild("app").source("r/builder:1").obj())
	if !known || !cmp.Equal(got, []string{"r/builder:1"}) {
		t.Errorf("BaseImages = %v, %v; want the builder image", got, known)
	}
	b := makeBuild("app").source("r/builder:$(V)").obj()
	if _, known := BaseImages(b); known {
		t.Error("a builder image with a variable is known")
	}
}

func TestDecidePreflight(t *testing.T) {
	ps := func(ss ...string) []platform.Platform {
		var out []platform.Platform
		for _, s := range ss {
			p, err := platform.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
		return out
	}
	all := []string{"linux/amd64", "linux/arm64", "linux/s390x"}
	tests := []struct {
		name        string
		allowed     []string
		checks      []BaseCheck
		wantFailure bool
		wantMsg     []string
		wantFailed  []string
		unchecked   int
	}{
		{name: "the base has every platform", checks: []BaseCheck{{Image: "a", Platforms: ps("linux/amd64", "linux/arm64/v8", "linux/s390x", "linux/ppc64le")}}},
		{name: "a required platform missing fails the build, naming missing and present",
			checks:      []BaseCheck{{Image: "r/a:1", Platforms: ps("linux/amd64", "linux/arm64")}},
			wantFailure: true, wantMsg: []string{"base image r/a:1 has no linux/s390x (it has linux/amd64, linux/arm64)", "leave linux/s390x out"},
			wantFailed: []string{"linux/s390x"}},
		{name: "every missing platform is named, allowed to fail or not",
			allowed:     []string{"linux/arm64"},
			checks:      []BaseCheck{{Image: "r/a:1", Platforms: ps("linux/amd64")}},
			wantFailure: true, wantMsg: []string{"has no linux/arm64", "has no linux/s390x"}, wantFailed: []string{"linux/arm64", "linux/s390x"}},
		{name: "missing platforms all allowed to fail: only they fail",
			allowed:    []string{"linux/s390x"},
			checks:     []BaseCheck{{Image: "r/a:1", Platforms: ps("linux/amd64", "linux/arm64")}},
			wantFailed: []string{"linux/s390x"}},
		{name: "a second base image lacking one fails too",
			checks:      []BaseCheck{{Image: "r/a:1", Platforms: ps(all...)}, {Image: "r/b:1", Platforms: ps("linux/amd64", "linux/s390x")}},
			wantFailure: true, wantMsg: []string{"base image r/b:1 has no linux/arm64"}, wantFailed: []string{"linux/arm64"}},
		{name: "windows/arm64 in the base is not linux/arm64",
			checks:      []BaseCheck{{Image: "r/a:1", Platforms: ps("linux/amd64", "windows/arm64", "linux/s390x")}},
			wantFailure: true, wantMsg: []string{"has no linux/arm64"}, wantFailed: []string{"linux/arm64"}},
		{name: "an image that could not be inspected decides nothing",
			checks:    []BaseCheck{{Image: "r/a:1", Err: errors.New("connection refused")}},
			unchecked: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pf := DecidePreflight(all, tt.allowed, tt.checks)
			if (pf.Failure != nil) != tt.wantFailure {
				t.Fatalf("failure %+v, want one: %v", pf.Failure, tt.wantFailure)
			}
			if pf.Failure != nil {
				if pf.Failure.Reason != buildv1.StatusReasonBaseImagePlatformNotFound || pf.Failure.Phase != buildv1.BuildPhaseFailed {
					t.Errorf("failure %+v", pf.Failure)
				}
				for _, want := range tt.wantMsg {
					if !strings.Contains(pf.Failure.Message, want) {
						t.Errorf("message %q does not say %q", pf.Failure.Message, want)
					}
				}
			}
			var failed []string
			for p := range pf.Failed {
				failed = append(failed, p)
			}
			slices.Sort(failed)
			if diff := cmp.Diff(tt.wantFailed, failed); diff != "" {
				t.Errorf("failed platforms (-want +got):\n%s", diff)
			}
			if len(pf.Unchecked) != tt.unchecked {
				t.Errorf("unchecked %v, want %d", pf.Unchecked, tt.unchecked)
			}
		})
	}
}
