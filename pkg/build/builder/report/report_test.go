package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/image"
	"github.com/archway-build/archway/pkg/build/builder/source"
	"github.com/archway-build/archway/pkg/registry"
)

func TestReason(t *testing.T) {
	tests := []struct {
		err  error
		want buildv1.StatusReason
	}{
		{nil, ""},
		{&source.Error{Reason: buildv1.StatusReasonInvalidContextDirectory, Err: errors.New("x")}, buildv1.StatusReasonInvalidContextDirectory},
		{fmt.Errorf("wrapped: %w", &source.Error{Reason: buildv1.StatusReasonFetchSourceFailed, Err: errors.New("x")}), buildv1.StatusReasonFetchSourceFailed},
		{&image.StageError{Stage: image.StageDockerfile, Err: errors.New("x")}, buildv1.StatusReasonManageDockerfileFailed},
		{&image.StageError{Stage: image.StageBuild, Err: errors.New("exit status 1")}, buildv1.StatusReasonDockerBuildFailed},
		{&image.StageError{Stage: image.StageBuild, Err: &image.BaseImagePlatformError{}}, buildv1.StatusReasonDockerBuildFailed},
		{&image.StageError{Stage: image.StagePush, Err: errors.New("401")}, buildv1.StatusReasonPushImageToRegistryFailed},
		{&image.StageError{Stage: image.StageBuild, Err: &registry.BlockedError{}}, buildv1.StatusReasonPullBuilderImageFailed},
		{&image.StageError{Stage: image.StagePush, Err: &registry.BlockedError{Push: true}}, buildv1.StatusReasonPushImageToRegistryFailed},
		{&image.StageError{Stage: image.StageInspect, Err: &image.PlatformMismatchError{}}, buildv1.StatusReasonGenericBuildFailed},
		{errors.New("something else"), buildv1.StatusReasonGenericBuildFailed},
	}
	for _, tt := range tests {
		if got := Reason(tt.err); got != tt.want {
			t.Errorf("Reason(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestFieldManager(t *testing.T) {
	for p, want := range map[string]string{
		"linux/amd64":    "archway-builder-linux-amd64",
		"linux/arm64/v8": "archway-builder-linux-arm64",
		"linux/arm":      "archway-builder-linux-arm-v7",
		"bogus":          "archway-builder-bogus",
	} {
		if got := FieldManager(p); got != want {
			t.Errorf("FieldManager(%q) = %q, want %q", p, got, want)
		}
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestPlatformStatus(t *testing.T) {
	started := metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	done := metav1.NewTime(started.Add(90 * time.Second))
	img := image.Image{
		Reference: "r/app@sha256:abc", Digest: "sha256:abc", MediaType: ocispec.MediaTypeImageManifest, Size: 1234,
		Platform: ocispec.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"},
	}
	tests := []struct {
		name  string
		entry buildv1.BuildStatusPlatform
		want  string
	}{
		{
			name:  "running",
			entry: buildv1.BuildStatusPlatform{Platform: "linux/arm64", Phase: buildv1.BuildPhaseRunning, PodName: "p", StartTimestamp: &started},
			want:  `{"platforms":[{"phase":"Running","platform":"linux/arm64","podName":"p","startTimestamp":"2026-11-22T10:00:00Z"}]}`,
		},
		{
			name: "complete",
			entry: buildv1.BuildStatusPlatform{Platform: "linux/arm64", Phase: buildv1.BuildPhaseComplete, PodName: "p",
				StartTimestamp: &started, CompletionTimestamp: &done, OutputDockerImageReference: "r/app:v1-linux-arm64",
				Output: PlatformOutput(img)},
			want: `{"platforms":[{"completionTimestamp":"2026-11-22T10:01:30Z","output":{"architecture":"arm64","imageDigest":"sha256:abc","mediaType":"application/vnd.oci.image.manifest.v1+json","os":"linux","size":1234,"variant":"v8"},"outputDockerImageReference":"r/app:v1-linux-arm64","phase":"Complete","platform":"linux/arm64","podName":"p","startTimestamp":"2026-11-22T10:00:00Z"}]}`,
		},
		{
			name: "failed",
			entry: buildv1.BuildStatusPlatform{Platform: "linux/s390x", Phase: buildv1.BuildPhaseFailed,
				Reason: buildv1.StatusReasonDockerBuildFailed, Message: "exit status 1"},
			want: `{"platforms":[{"message":"exit status 1","phase":"Failed","platform":"linux/s390x","reason":"DockerBuildFailed"}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s := toJSON(t, PlatformStatus(tt.entry)); s != tt.want {
				t.Errorf("got  %s\nwant %s", s, tt.want)
			}
		})
	}
}

func TestClassicStatus(t *testing.T) {
	img := &image.Image{Digest: "sha256:abc"}
	got := ClassicCompleteStatus(Result{OutputReference: "r/app:v1", Image: img})
	if s, want := toJSON(t, got), `{"output":{"to":{"imageDigest":"sha256:abc"}},"outputDockerImageReference":"r/app:v1"}`; s != want {
		t.Errorf("complete: got %s, want %s", s, want)
	}
	got = ClassicCompleteStatus(Result{})
	if s := toJSON(t, got); s != `{}` {
		t.Errorf("complete without output: got %s", s)
	}
	long := strings.Repeat("x", 3*maxLogSnippet) + "END"
	got = ClassicFailedStatus(Failure{Reason: buildv1.StatusReasonDockerBuildFailed, Message: "m", LogSnippet: long})
	snippet, _ := got["logSnippet"].(string)
	if got["reason"] != "DockerBuildFailed" || got["message"] != "m" || len(snippet) != maxLogSnippet || !strings.HasSuffix(snippet, "END") {
		t.Errorf("failed: got %v", got)
	}
	if _, ok := got["phase"]; ok {
		t.Error("a classic builder must not set the phase")
	}
}

// TestPlatformStatusNamesEveryField: an entry with every field set applies
// every field, so a field added to the API is not silently left out of what
// the builder owns.
func TestPlatformStatusNamesEveryField(t *testing.T) {
	now := metav1.Now()
	e := buildv1.BuildStatusPlatform{Platform: "linux/arm64", Phase: buildv1.BuildPhaseFailed, Reason: "R", Message: "m", PodName: "p", EmulatedOn: "amd64",
		StartTimestamp: &now, CompletionTimestamp: &now, OutputDockerImageReference: "r/app:v1", LogSnippet: "log", Commit: "abc",
		Output: &buildv1.BuildStatusPlatformOutput{ImageDigest: "sha256:x", MediaType: "m", Size: 1, OS: "linux",
			Architecture: "arm64", Variant: "v8", OSVersion: "1", OSFeatures: []string{"f"}}}
	var want map[string]any
	if err := json.Unmarshal([]byte(toJSON(t, e)), &want); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(toJSON(t, PlatformStatus(e)["platforms"].([]any)[0])), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("applied entry (-every field of the API +applied):\n%s", diff)
	}
}
