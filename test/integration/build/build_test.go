package build

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	buildcontroller "github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/test/bed"
)

const (
	amd64   = "linux/amd64"
	arm64   = "linux/arm64"
	ppc64le = "linux/ppc64le"
	s390x   = "linux/s390x"
	riscv64 = "linux/riscv64"
)

var fourPlatforms = []string{amd64, arm64, ppc64le, s390x}

// step is one action of a case and what a user then sees.
type step struct {
	name string
	do   func(h *harness)
}

func createBuild(mut func(*buildv1.Build), platforms ...string) step {
	return step{"create a build for " + strings.Join(platforms, ","), func(h *harness) {
		b := h.buildObj("app", platforms...)
		if mut != nil {
			mut(b)
		}
		h.create(b)
	}}
}

// wantPlatformPods waits for exactly one pod per platform, each bound by the
// scheduler to the bed's node of its architecture, labelled and annotated
// for its platform, and the build's entries New or later.
func wantPlatformPods(platforms ...string) step {
	return step{"one pod per platform, each bound to its architecture's node", func(h *harness) {
		var names []string
		for _, p := range platforms {
			names = append(names, h.platformPod(p))
		}
		// A build with a manifest list gets its manifest-list pod with the
		// platform pods (the pod-name annotation, written with them,
		// names it).
		pods := h.waitPodNames(h.withManifestListPod(names)...)
		output := h.get().Spec.Output.To.Name
		for _, p := range platforms {
			pod := pods[h.platformPod(p)]
			arch := strings.Split(p, "/")[1]
			node, err := testBed.WaitPodBound(h.ctx, h.ns, pod.Name)
			if err != nil {
				h.t.Fatal(err)
			}
			if want := "node-" + arch + "-1"; node != want {
				h.t.Errorf("pod %s bound to %s, want %s", pod.Name, node, want)
			}
			if pod.Annotations[buildv1.PlatformAnnotation] != p || pod.Labels[buildv1.PodRoleLabel] != buildv1.PodRoleBuild ||
				pod.Spec.NodeSelector[corev1.LabelArchStable] != arch {
				h.t.Errorf("pod %s: labels %v, annotations %v, node selector %v", pod.Name, pod.Labels, pod.Annotations, pod.Spec.NodeSelector)
			}
			if ref := pod.OwnerReferences; len(ref) != 1 || ref[0].Kind != "Build" || !ptr.Deref(ref[0].Controller, false) {
				h.t.Errorf("pod %s owners %+v", pod.Name, ref)
			}
			pb := podBuild(h.t, pod)
			if !slices.Equal(pb.Spec.Platforms, []string{p}) || pb.Spec.Output.To.Name != output+"-"+strings.ReplaceAll(p, "/", "-") {
				h.t.Errorf("pod %s BUILD: platforms %v, output %s", pod.Name, pb.Spec.Platforms, pb.Spec.Output.To.Name)
			}
		}
		b := h.get()
		for _, p := range platforms {
			if e, ok := entries(b)[p]; !ok || e.PodName != h.platformPod(p) {
				h.t.Errorf("status.platforms has no entry for %s naming its pod: %+v", p, b.Status.Platforms)
			}
		}
		if sel := b.Annotations[buildv1.PodSelectorAnnotation]; sel != buildv1.BuildLabel+"=app" {
			h.t.Errorf("pod-selector annotation %q", sel)
		}
	}}
}

func startPlatforms(platforms ...string) step {
	return step{"pods run and builders report Running", func(h *harness) {
		for _, p := range platforms {
			h.startPlatform(p)
		}
	}}
}

func succeed(platforms ...string) step {
	return step{"builders of " + strings.Join(platforms, ",") + " succeed", func(h *harness) {
		for _, p := range platforms {
			h.succeedPlatform(p)
		}
	}}
}

func fail(p string) step {
	return step{"the builder of " + p + " fails", func(h *harness) { h.failPlatform(p) }}
}

func wantPhase(phase buildv1.BuildPhase, reason buildv1.StatusReason) step {
	return step{"build " + string(phase) + " " + string(reason), func(h *harness) { h.waitPhase(phase, reason) }}
}

func wantMessage(words ...string) step {
	return step{"the build's message says " + strings.Join(words, ", "), func(h *harness) {
		msg := h.get().Status.Message
		for _, w := range words {
			if !strings.Contains(msg, w) {
				h.t.Errorf("message %q does not say %q", msg, w)
			}
		}
	}}
}

func wantEntry(p string, phase buildv1.BuildPhase, reason buildv1.StatusReason) step {
	return step{"entry " + p + " " + string(phase) + " " + string(reason), func(h *harness) {
		h.waitBuild(p+" "+string(phase), func(b *buildv1.Build) bool {
			e, ok := entries(b)[p]
			return ok && e.Phase == phase && e.Reason == reason
		})
	}}
}

// wantManifestListPod waits for the manifest-list pod and checks it.
func wantManifestListPod(platforms ...string) step {
	return step{"the manifest-list pod appears", func(h *harness) {
		var names []string
		for _, p := range platforms {
			names = append(names, h.platformPod(p))
		}
		names = append(names, buildv1.ManifestListPodName(h.build))
		pods := h.waitPodNames(names...)
		ml := pods[buildv1.ManifestListPodName(h.build)]
		if ml.Labels[buildv1.PodRoleLabel] != buildv1.PodRoleManifestList || !strings.HasPrefix(strings.Join(ml.Spec.Containers[0].Command, " "), "builder manifest-list") || buildcontroller.RemovesTags(ml) {
			h.t.Errorf("manifest-list pod labels %v command %v", ml.Labels, ml.Spec.Containers[0].Command)
		}
		if _, err := testBed.WaitPodBound(h.ctx, h.ns, ml.Name); err != nil {
			h.t.Fatal(err)
		}
	}}
}

// wantCleanupPod waits for the manifest-list pod that removes the tags of
// a build that ended without a manifest list, and checks that no platform
// pod runs beside it. The manifest-list pod made with the platform pods is
// deleted first (this bed has no kubelet: the step ends it).
func wantCleanupPod() step {
	return step{"once no platform pod runs, the manifest-list pod removes the per-platform tags", func(h *harness) {
		name := buildv1.ManifestListPodName(h.build)
		var ml corev1.Pod
		err := bed.WaitFor(h.ctx, k8s, client.ObjectKey{Namespace: h.ns, Name: name}, &ml, func(p *corev1.Pod) bool {
			return p.DeletionTimestamp != nil || buildcontroller.RemovesTags(p)
		})
		if err != nil {
			h.t.Fatalf("waiting for the manifest-list pod made with the platform pods to be deleted: %v", err)
		}
		if !buildcontroller.RemovesTags(&ml) {
			if ml.Status.Phase != corev1.PodSucceeded && ml.Status.Phase != corev1.PodFailed {
				h.finishPod(name, 0, "")
			}
			if err := bed.WaitFor(h.ctx, k8s, client.ObjectKey{Namespace: h.ns, Name: name}, &ml, buildcontroller.RemovesTags); err != nil {
				h.t.Fatalf("waiting for the manifest-list pod that removes the tags: %v", err)
			}
		}
		for n, p := range h.pods() {
			if n != name && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				h.t.Errorf("platform pod %s is %s beside the manifest-list pod", n, p.Status.Phase)
			}
		}
	}}
}

// wantTagsCondition waits for the PlatformTagsRemoved condition.
func wantTagsCondition(status metav1.ConditionStatus, reason, words string) step {
	return step{"condition PlatformTagsRemoved " + string(status) + " " + reason, func(h *harness) {
		h.waitTagsCondition(status, reason, func(msg string) bool { return strings.Contains(msg, words) })
	}}
}

// finishManifestList plays `builder manifest-list`: it records the index
// digest (its own field manager) and its pod exits.
func finishManifestList(exitCode int32, message string) step {
	return step{"the manifest-list pod ends", func(h *harness) {
		name := buildv1.ManifestListPodName(h.build)
		if err := testBed.SetPodRunning(h.ctx, h.pod(name)); err != nil {
			h.t.Fatal(err)
		}
		if exitCode == 0 {
			patch := []byte(`{"status":{"outputDockerImageReference":"registry.example.com/team/app:v1","output":{"to":{"imageDigest":"sha256:` + strings.Repeat("ab", 32) + `"}}}}`)
			b := &buildv1.Build{}
			b.Name, b.Namespace = h.build, h.ns
			if err := k8s.Status().Patch(h.ctx, b, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("archway-builder-manifest-list")); err != nil {
				h.t.Fatal(err)
			}
		}
		h.finishPod(name, exitCode, message)
	}}
}

// wantNoPods checks that the build has no pod, and gets none once the
// controller has handled the Build as it is.
func wantNoPods() step {
	return step{"no pod at all", func(h *harness) {
		h.waitHandled()
		if pods := h.pods(); len(pods) > 0 {
			h.t.Errorf("the build has pods %v", keys(pods))
		}
	}}
}

func wantEvents(reasons ...string) step {
	return step{"events " + strings.Join(reasons, ","), func(h *harness) { h.waitEvents(reasons...) }}
}

func cancelBuild() step {
	return step{"a user cancels the build (status.cancelled, as oc cancel-build)", func(h *harness) {
		b := &buildv1.Build{}
		b.Name, b.Namespace = h.build, h.ns
		if err := k8s.Status().Patch(h.ctx, b, client.RawPatch(types.MergePatchType, []byte(`{"status":{"cancelled":true}}`))); err != nil {
			h.t.Fatal(err)
		}
	}}
}

// wantPodsDeleted waits until every pod of the build is being deleted, then
// reports them ended (as their kubelets would once killed) and waits until
// they are gone.
func wantPodsDeleted(names ...string) step {
	return step{"the build's running pods are deleted", func(h *harness) {
		for _, name := range names {
			pod := &corev1.Pod{}
			err := bed.WaitFor(h.ctx, k8s, client.ObjectKey{Namespace: h.ns, Name: name}, pod, func(p *corev1.Pod) bool {
				return p.DeletionTimestamp != nil
			})
			if err != nil && !apierrors.IsNotFound(err) && !strings.Contains(err.Error(), "not found") {
				h.t.Fatalf("pod %s not deleted: %v", name, err)
			}
			if err == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
				h.finishPod(name, 137, "killed")
			}
			if err := bed.WaitGone(h.ctx, k8s, client.ObjectKey{Namespace: h.ns, Name: name}, &corev1.Pod{}); err != nil {
				h.t.Fatal(err)
			}
		}
	}}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// podBuild decodes a pod's BUILD.
func podBuild(t testing.TB, pod *corev1.Pod) *buildv1.Build {
	t.Helper()
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == buildv1.BuildEnv {
			b := &buildv1.Build{}
			if err := json.Unmarshal([]byte(e.Value), b); err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("pod %s has no BUILD", pod.Name)
	return nil
}

func TestBuildController(t *testing.T) {
	t.Parallel()
	names := func(h *harness, ps ...string) []string {
		var out []string
		for _, p := range ps {
			out = append(out, h.platformPod(p))
		}
		return out
	}
	cases := []struct {
		name   string
		config func(*configv1alpha1.BuildControllerConfig)
		steps  []step
	}{
		{
			name: "four platforms: four pods on their nodes, then the manifest list, then Complete",
			steps: []step{
				createBuild(nil, fourPlatforms...),
				wantPlatformPods(fourPlatforms...),
				wantPhase(buildv1.BuildPhasePending, ""),
				startPlatforms(fourPlatforms...),
				wantPhase(buildv1.BuildPhaseRunning, ""),
				wantEvents(buildv1.EventReasonBuildStarted),
				succeed(amd64, arm64, ppc64le),
				{"the manifest-list pod, made with the platform pods, ends without deciding while a platform runs", func(h *harness) {
					h.waitBuild("platformsSummary 3/4", func(b *buildv1.Build) bool { return b.Status.PlatformsSummary == "3/4" })
					ml := h.pod(buildv1.ManifestListPodName(h.build))
					if buildcontroller.RemovesTags(ml) {
						h.t.Errorf("manifest-list pod command %v", ml.Spec.Containers[0].Command)
					}
					// The controller's cache may show it ended before the
					// last platform's entry: nothing is decided from it yet.
					finishManifestList(0, "").do(h)
					h.waitHandled()
					if b := h.get(); b.Status.Phase != buildv1.BuildPhaseRunning {
						h.t.Errorf("build %s (%s) while linux/s390x runs, want Running", b.Status.Phase, b.Status.Reason)
					}
				}},
				succeed(s390x),
				wantManifestListPod(fourPlatforms...),
				wantPhase(buildv1.BuildPhaseComplete, ""),
				wantEvents(buildv1.EventReasonBuildStarted, buildv1.EventReasonBuildCompleted),
				{"status: every builder's entry kept, summaries, output, pod-name annotation", func(h *harness) {
					b := h.get()
					for _, p := range fourPlatforms {
						e := entries(b)[p]
						if e.Phase != buildv1.BuildPhaseComplete || e.Output == nil || e.Output.ImageDigest != digestOf(p) || e.PodName != h.platformPod(p) {
							h.t.Errorf("entry %s = %+v", p, e)
						}
					}
					if b.Status.PlatformsSummary != "4/4" || b.Status.CompletionTimestamp == nil || b.Status.StartTimestamp == nil ||
						b.Status.Output.To == nil || b.Annotations[buildv1.BuildPodNameAnnotation] != buildv1.ManifestListPodName(h.build) {
						h.t.Errorf("status %+v annotations %v", b.Status, b.Annotations)
					}
				}},
			},
		},
		{
			name: "an allowed-to-fail platform fails: the build completes with the others",
			steps: []step{
				createBuild(func(b *buildv1.Build) { b.Spec.PlatformsAllowedToFail = []string{s390x} }, fourPlatforms...),
				wantPlatformPods(fourPlatforms...),
				startPlatforms(fourPlatforms...),
				fail(s390x),
				wantEntry(s390x, buildv1.BuildPhaseFailed, buildv1.StatusReasonDockerBuildFailed),
				wantPhase(buildv1.BuildPhaseRunning, ""),
				succeed(amd64, arm64, ppc64le),
				wantManifestListPod(fourPlatforms...),
				finishManifestList(0, ""),
				wantPhase(buildv1.BuildPhaseComplete, ""),
				{"summary 3/4", func(h *harness) {
					if got := h.get().Status.PlatformsSummary; got != "3/4" {
						h.t.Errorf("platformsSummary %q", got)
					}
				}},
			},
		},
		{
			name: "a required platform fails: the build fails at once, the others are cancelled",
			steps: []step{
				createBuild(nil, fourPlatforms...),
				wantPlatformPods(fourPlatforms...),
				startPlatforms(fourPlatforms...),
				succeed(amd64),
				fail(s390x),
				wantPhase(buildv1.BuildPhaseFailed, buildv1.StatusReasonPlatformBuildFailed),
				wantMessage("linux/s390x", "DockerBuildFailed"),
				wantEntry(arm64, buildv1.BuildPhaseCancelled, buildv1.StatusReasonCancelledBuild),
				wantEntry(amd64, buildv1.BuildPhaseComplete, ""),
				wantEvents(buildv1.EventReasonBuildFailed),
				{"the running pods are deleted", func(h *harness) {
					wantPodsDeleted(names(h, arm64, ppc64le)...).do(h)
				}},
				// Once no platform pod runs, the manifest-list pod removes
				// the tags the platforms pushed; the build stays Failed.
				wantCleanupPod(),
				wantTagsCondition(metav1.ConditionUnknown, buildv1.ReasonRemovingPlatformTags, "manifest-list"),
				wantEvents(buildv1.EventReasonBuildFailed, buildv1.EventReasonRemovingPlatformTags),
				wantPhase(buildv1.BuildPhaseFailed, buildv1.StatusReasonPlatformBuildFailed),
			},
		},
		{
			name: "no node for a required platform: NodePlatformNotFound, no pods",
			steps: []step{
				createBuild(nil, amd64, riscv64),
				wantPhase(buildv1.BuildPhaseError, buildv1.StatusReasonNodePlatformNotFound),
				wantMessage("linux/riscv64"),
				wantEntry(riscv64, buildv1.BuildPhaseError, buildv1.StatusReasonNodePlatformNotFound),
				wantNoPods(),
				wantEvents(buildv1.EventReasonBuildFailed),
			},
		},
		{
			name: "no node for an allowed-to-fail platform: it fails alone, without a pod",
			steps: []step{
				createBuild(func(b *buildv1.Build) { b.Spec.PlatformsAllowedToFail = []string{riscv64} }, amd64, arm64, riscv64),
				wantEntry(riscv64, buildv1.BuildPhaseError, buildv1.StatusReasonNodePlatformNotFound),
				wantPlatformPods(amd64, arm64),
				startPlatforms(amd64, arm64),
				succeed(amd64, arm64),
				wantManifestListPod(amd64, arm64),
				finishManifestList(0, ""),
				wantPhase(buildv1.BuildPhaseComplete, ""),
			},
		},
		{
			name: "the build's node selector contradicts a platform: NodeSelectorPlatformConflict, no pods",
			steps: []step{
				createBuild(func(b *buildv1.Build) {
					b.Spec.NodeSelector = buildv1.OptionalNodeSelector{corev1.LabelArchStable: "amd64"}
				}, amd64, arm64),
				wantPhase(buildv1.BuildPhaseFailed, buildv1.StatusReasonNodeSelectorPlatformConflict),
				wantMessage("linux/arm64", "kubernetes.io/arch=amd64"),
				wantNoPods(),
			},
		},
		{
			name: "cancel mid-build: every pod deleted, unfinished platforms Cancelled",
			steps: []step{
				createBuild(nil, fourPlatforms...),
				wantPlatformPods(fourPlatforms...),
				startPlatforms(fourPlatforms...),
				succeed(amd64),
				cancelBuild(),
				wantPhase(buildv1.BuildPhaseCancelled, buildv1.StatusReasonCancelledBuild),
				wantEntry(arm64, buildv1.BuildPhaseCancelled, buildv1.StatusReasonCancelledBuild),
				wantEntry(s390x, buildv1.BuildPhaseCancelled, buildv1.StatusReasonCancelledBuild),
				wantEntry(amd64, buildv1.BuildPhaseComplete, ""),
				wantEvents(buildv1.EventReasonBuildCancelled),
				{"pods deleted", func(h *harness) { wantPodsDeleted(names(h, arm64, ppc64le, s390x)...).do(h) }},
				wantCleanupPod(),
				wantTagsCondition(metav1.ConditionUnknown, buildv1.ReasonRemovingPlatformTags, "manifest-list"),
				wantEvents(buildv1.EventReasonBuildCancelled, buildv1.EventReasonRemovingPlatformTags),
			},
		},
		{
			name: "a build pod deleted by someone: BuildPodDeleted fails the build",
			steps: []step{
				createBuild(nil, fourPlatforms...),
				wantPlatformPods(fourPlatforms...),
				startPlatforms(fourPlatforms...),
				{"someone deletes the arm64 pod", func(h *harness) {
					if err := k8s.Delete(h.ctx, h.pod(h.platformPod(arm64))); err != nil {
						h.t.Fatal(err)
					}
				}},
				wantEntry(arm64, buildv1.BuildPhaseError, buildv1.StatusReasonBuildPodDeleted),
				wantPhase(buildv1.BuildPhaseError, buildv1.StatusReasonPlatformBuildFailed),
				wantMessage("BuildPodDeleted"),
				{"pods deleted", func(h *harness) { wantPodsDeleted(names(h, fourPlatforms...)...).do(h) }},
			},
		},
		{
			name: "classic single-platform build: one pod, no platforms, no manifest list, as OpenShift",
			steps: []step{
				createBuild(func(b *buildv1.Build) {
					b.Spec.NodeSelector = buildv1.OptionalNodeSelector{corev1.LabelArchStable: "arm64"}
				}),
				{"one pod app-build on the arm64 node", func(h *harness) {
					h.waitPodNames("app-build")
					node, err := testBed.WaitPodBound(h.ctx, h.ns, "app-build")
					if err != nil {
						h.t.Fatal(err)
					}
					if node != "node-arm64-1" {
						h.t.Errorf("bound to %s", node)
					}
					pb := podBuild(h.t, h.pod("app-build"))
					if len(pb.Spec.Platforms) != 0 || pb.Spec.Output.To.Name != "registry.example.com/team/app:v1" {
						h.t.Errorf("BUILD %+v", pb.Spec)
					}
				}},
				{"the pod runs", func(h *harness) {
					if err := testBed.SetPodRunning(h.ctx, h.pod("app-build")); err != nil {
						h.t.Fatal(err)
					}
				}},
				wantPhase(buildv1.BuildPhaseRunning, ""),
				{"the pod succeeds", func(h *harness) { h.finishPod("app-build", 0, "") }},
				wantPhase(buildv1.BuildPhaseComplete, ""),
				{"no platforms, no manifest list", func(h *harness) {
					b := h.get()
					if len(b.Status.Platforms) != 0 || b.Status.PlatformsSummary != "" || len(h.pods()) != 1 ||
						b.Annotations[buildv1.BuildPodNameAnnotation] != "app-build" {
						h.t.Errorf("classic build status %+v pods %v", b.Status, keys(h.pods()))
					}
				}},
			},
		},
		{
			name:   "manifestList=false: the platforms' images stay at their tags, no manifest-list pod",
			config: func(c *configv1alpha1.BuildControllerConfig) { c.BuildOverrides.ManifestList = ptr.To(false) },
			steps: []step{
				createBuild(nil, fourPlatforms...),
				wantPlatformPods(fourPlatforms...),
				startPlatforms(fourPlatforms...),
				succeed(fourPlatforms...),
				wantPhase(buildv1.BuildPhaseComplete, ""),
				{"no manifest-list pod", func(h *harness) {
					if _, ok := h.pods()[buildv1.ManifestListPodName(h.build)]; ok {
						h.t.Error("manifest-list pod created with manifestList=false")
					}
				}},
			},
		},
		{
			name:   "archNodeSelector=false: pods not pinned to an architecture, no node check",
			config: func(c *configv1alpha1.BuildControllerConfig) { c.BuildOverrides.ArchNodeSelector = ptr.To(false) },
			steps: []step{
				createBuild(nil, amd64, riscv64),
				{"two pods without an arch selector, both scheduled", func(h *harness) {
					pods := h.waitPodNames(h.withManifestListPod(names(h, amd64, riscv64))...)
					for _, pod := range pods {
						if pod.Name == buildv1.ManifestListPodName(h.build) {
							continue // on any linux node, as ever
						}
						if _, ok := pod.Spec.NodeSelector[corev1.LabelArchStable]; ok {
							h.t.Errorf("pod %s node selector %v", pod.Name, pod.Spec.NodeSelector)
						}
						if _, err := testBed.WaitPodBound(h.ctx, h.ns, pod.Name); err != nil {
							h.t.Fatal(err)
						}
					}
				}},
				startPlatforms(amd64, riscv64),
				succeed(amd64, riscv64),
				wantManifestListPod(amd64, riscv64),
				finishManifestList(0, ""),
				wantPhase(buildv1.BuildPhaseComplete, ""),
			},
		},
		{
			name: "the manifest-list pod fails with the builder's reason",
			steps: []step{
				createBuild(nil, amd64, arm64),
				wantPlatformPods(amd64, arm64),
				startPlatforms(amd64, arm64),
				succeed(amd64, arm64),
				wantManifestListPod(amd64, arm64),
				finishManifestList(1, "PlatformVersionSkew: linux/arm64 was recorded Complete without an image digest"),
				wantPhase(buildv1.BuildPhaseFailed, buildv1.StatusReasonPlatformVersionSkew),
				wantMessage("linux/arm64"),
			},
		},
		{
			name: "a platform pod that fails without writing its entry fails its platform from the pod",
			steps: []step{
				createBuild(func(b *buildv1.Build) { b.Spec.PlatformsAllowedToFail = []string{arm64} }, amd64, arm64),
				wantPlatformPods(amd64, arm64),
				startPlatforms(amd64, arm64),
				{"the arm64 container is OOM-killed", func(h *harness) {
					if err := testBed.SetPodFinished(h.ctx, h.pod(h.platformPod(arm64)), 137, "OOMKilled", ""); err != nil {
						h.t.Fatal(err)
					}
				}},
				wantEntry(arm64, buildv1.BuildPhaseFailed, buildv1.StatusReasonOutOfMemoryKilled),
				succeed(amd64),
				wantManifestListPod(amd64, arm64),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "build")
			h.cfg = testConfig(tc.config)
			h.ctrl = startController(t, h.ns, h.cfg)
			for _, s := range tc.steps {
				s.do(h)
				if t.Failed() {
					t.Fatalf("after step %q: %s", s.name, describeBuild(h))
				}
			}
		})
	}
}

// describeBuild prints the Build's status and pods for a failure message.
func describeBuild(h *harness) string {
	b := &buildv1.Build{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: h.ns, Name: h.build}, b); err != nil {
		return err.Error()
	}
	st, _ := json.MarshalIndent(b.Status, "", "  ")
	return "build status:\n" + string(st) + "\npods: " + strings.Join(keys(h.pods()), ", ")
}
