package build

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/report"
	"github.com/archway-build/archway/test/bed"
)

// patchAs merge-patches the case's Build through c, as the builder records
// spec.revision.
func (h *harness) patchAs(c client.Client, patch map[string]any, opts ...client.PatchOption) error {
	data, err := json.Marshal(patch)
	if err != nil {
		h.t.Fatal(err)
	}
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: h.build}}
	return c.Patch(h.ctx, b, client.RawPatch(types.MergePatchType, data), opts...)
}

// TestRevisionWriters: with manifests/build-controller's revision policy, a
// service account of the Build's namespace (which may patch builds, to
// record the commit) changes a Build only from one of its platform pods
// (known by the UID build-controller recorded), only to set spec.revision where it is unset, and nothing else. With the
// policy's binding gone, the same forged changes go through (so the test
// can fail).
func TestRevisionWriters(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "revwriters")
	h.cfg = testConfig(nil)
	h.ctrl = startController(t, h.ns, h.cfg)
	// The builder service account may patch Builds, as its role grants in
	// a cluster.
	objs := h.writersPolicy("manifests/build-controller/revision_writers_policy.yaml", "builds", "get", "patch")
	createBuild(nil, amd64, arm64).do(h)
	wantPlatformPods(amd64, arm64).do(h)
	revision := map[string]any{"spec": map[string]any{"revision": map[string]any{"type": "Git",
		"git": map[string]any{"commit": strings.Repeat("a", 40), "message": "the first platform's fetch"}}}}
	forgedAnnotation := map[string]any{"metadata": map[string]any{"annotations": map[string]any{buildv1.BuildPodNameAnnotation: "intruder"}}}

	// The policy is in force once a write from no pod is refused.
	stranger := h.writer("")
	err := wait.PollUntilContextTimeout(h.ctx, 50*time.Millisecond, bed.DefaultTimeout, true, func(context.Context) (bool, error) {
		err := h.patchAs(stranger, revision, client.DryRunAll)
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), nil
	})
	if err != nil {
		t.Fatal("the revision writers policy never took effect")
	}
	refused := func(what string, err error, words string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), words) {
			t.Errorf("%s: got %v, want it refused saying %q", what, err, words)
		}
	}
	refused("a token bound to no pod", h.patchAs(stranger, revision), "only from one of the Build's pods")
	refused("a pod that is not the Build's", h.patchAs(h.writer("intruder"), revision), "is not a build pod of Build")
	refused("the manifest-list pod", h.patchAs(h.writer(buildv1.ManifestListPodName(h.build)), revision), "is not a build pod of Build")

	// build-controller records each platform pod's UID once the pod
	// exists; a pod's write is admitted by it (the builder waits for it).
	for _, p := range []string{amd64, arm64} {
		uid := string(h.pod(h.platformPod(p)).UID)
		if err := wait.PollUntilContextTimeout(h.ctx, 20*time.Millisecond, bed.DefaultTimeout, true, func(context.Context) (bool, error) {
			return report.PodUIDRecorded(p, uid)(h.get()), nil
		}); err != nil {
			t.Fatalf("build-controller never recorded the UID of the %s pod", p)
		}
	}
	refused("a pod named like the amd64 pod, with another UID", h.patchAs(h.writerWithUID(h.platformPod(amd64),
		"11111111-2222-3333-4444-555555555555"), revision), "that build-controller recorded")

	amd := h.writer(h.platformPod(amd64))
	refused("the amd64 pod changing an annotation", h.patchAs(amd, forgedAnnotation), "may only record spec.revision")
	refused("the amd64 pod recording with an annotation", h.patchAs(amd, map[string]any{"spec": revision["spec"],
		"metadata": forgedAnnotation["metadata"]}), "labels, annotations")
	refused("the amd64 pod naming a push secret", h.patchAs(amd, map[string]any{"spec": map[string]any{
		"output": map[string]any{"pushSecret": map[string]any{"name": "stolen"}}}}), "may only record spec.revision")
	if err := h.patchAs(amd, revision); err != nil {
		t.Fatalf("the amd64 pod recording the commit: %v", err)
	}
	if got := h.get().Spec.Revision; got == nil || got.Git == nil || got.Git.Commit != strings.Repeat("a", 40) {
		t.Fatalf("spec.revision %+v, want the recorded commit", got)
	}
	refused("the arm64 pod recording again", h.patchAs(h.writer(h.platformPod(arm64)), revision), "recorded already")

	// Without the binding the same forged change goes through.
	for _, o := range objs {
		if o.GetKind() == "ValidatingAdmissionPolicyBinding" {
			if err := k8s.Delete(h.ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = wait.PollUntilContextTimeout(h.ctx, 50*time.Millisecond, bed.DefaultTimeout, true, func(context.Context) (bool, error) {
		return h.patchAs(amd, forgedAnnotation, client.DryRunAll) == nil, nil
	})
	if err != nil {
		t.Error("with the policy unbound, a forged change is still refused: the checks above prove nothing")
	}
}
