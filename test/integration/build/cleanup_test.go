package build

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	buildcontroller "github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/test/bed"
)

var builderBinary = sync.OnceValues(func() (string, error) {
	return bed.GoBuild(context.Background(), testBed.Dir, "./cmd/builder")
})

// TestLatePushIsUntagged forces the order that used to leave a tag behind:
// a required platform fails, and a platform whose pod the controller is
// stopping pushes its image after the failure was recorded, before its pod
// ends. The manifest-list pod made with the platform pods (the real
// builder) must remove nothing; the controller must not start the one
// that removes the per-platform tags of a build that ended until that pod
// has ended; then the real `builder manifest-list --remove-tags` removes
// every per-platform tag, the late one included, and pushes no index.
func TestLatePushIsUntagged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "late")
	h.cfg = testConfig(nil)
	h.ctrl = startController(t, h.ns, h.cfg)
	repo := h.ns + "/app"
	output := testBed.Registry.Host + "/" + repo + ":v1"
	b := h.buildObj("app", fourPlatforms...)
	b.Spec.Output.To.Name = output
	h.create(b)
	wantPlatformPods(fourPlatforms...).do(h)
	startPlatforms(fourPlatforms...).do(h)
	// The manifest-list pod made with the platform pods runs the real
	// builder: it waits for the platforms.
	early := h.pod(buildv1.ManifestListPodName(h.build))
	if err := testBed.SetPodRunning(h.ctx, early); err != nil {
		t.Fatal(err)
	}
	type result struct {
		out []byte
		err error
	}
	earlyDone := make(chan result, 1)
	go func() {
		out, err := runPodBuilder(h, early)
		earlyDone <- result{out, err}
	}()

	push := func(p string) {
		t.Helper()
		tag, err := platform.Tag(output, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := testBed.PushBasePlatform(h.ctx, testBed.Registry, tag, p); err != nil {
			t.Fatal(err)
		}
	}
	// amd64 pushes and succeeds; s390x, required, fails.
	push(amd64)
	h.succeedPlatform(amd64)
	h.failPlatform(s390x)
	h.waitPhase(buildv1.BuildPhaseFailed, buildv1.StatusReasonPlatformBuildFailed)
	// It sees the Build end and exits touching nothing (amd64's tag stays:
	// arm64's pod may still push); the controller deletes it.
	r := <-earlyDone
	t.Logf("builder manifest-list (made with the platform pods):\n%s", r.out)
	if r.err != nil || !strings.Contains(string(r.out), "no manifest list to push") {
		t.Fatalf("the manifest-list pod made with the platform pods: %v, want exit 0 saying the build ended", r.err)
	}
	if err := bed.WaitFor(h.ctx, k8s, client.ObjectKeyFromObject(early), &corev1.Pod{},
		func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }); err != nil {
		t.Fatalf("the controller deletes the manifest-list pod made with the platform pods: %v", err)
	}
	h.finishPod(early.Name, 0, "")
	if err := bed.WaitGone(h.ctx, k8s, client.ObjectKeyFromObject(early), &corev1.Pod{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{arm64, ppc64le} {
		pod := &corev1.Pod{}
		if err := bed.WaitFor(h.ctx, k8s, client.ObjectKey{Namespace: h.ns, Name: h.platformPod(p)}, pod,
			func(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }); err != nil {
			t.Fatalf("the controller stops the pod of %s: %v", p, err)
		}
	}

	// arm64's builder, still running, finishes its push after the failure.
	push(arm64)
	// ppc64le's pod ends; arm64's has not yet.
	h.finishPod(h.platformPod(ppc64le), 137, "killed")
	if err := bed.WaitGone(h.ctx, k8s, client.ObjectKey{Namespace: h.ns, Name: h.platformPod(ppc64le)}, &corev1.Pod{}); err != nil {
		t.Fatal(err)
	}
	// The controller has seen ppc64le's pod go and says it waits for
	// arm64's alone (a positive signal), and has not started the
	// manifest-list pod.
	h.waitTagsCondition(metav1.ConditionFalse, buildv1.ReasonWaitingForBuildPods, func(msg string) bool {
		return strings.Contains(msg, h.platformPod(arm64)) && !strings.Contains(msg, h.platformPod(ppc64le))
	})
	if _, ok := h.pods()[buildv1.ManifestListPodName(h.build)]; ok {
		t.Fatal("the manifest-list pod that removes the tags was created while the arm64 pod could still push")
	}

	before, err := testBed.Registry.Tags(h.ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(before)
	if want := []string{"v1-linux-amd64", "v1-linux-arm64"}; !slices.Equal(before, want) {
		t.Fatalf("tags before the cleanup: %v, want %v", before, want)
	}

	h.finishPod(h.platformPod(arm64), 137, "killed")
	ml := h.waitPodNames(h.platformPod(amd64), h.platformPod(s390x), buildv1.ManifestListPodName(h.build))[buildv1.ManifestListPodName(h.build)]
	if !buildcontroller.RemovesTags(ml) || ml.UID == early.UID {
		t.Fatalf("manifest-list pod %s command %v: want a new one started with %s", ml.UID, ml.Spec.Containers[0].Command, buildcontroller.RemoveTagsArg)
	}
	if err := testBed.SetPodRunning(h.ctx, ml); err != nil {
		t.Fatal(err)
	}
	out, err := runPodBuilder(h, ml)
	t.Logf("builder manifest-list:\n%s", out)
	if err != nil {
		t.Fatalf("builder manifest-list: %v", err)
	}
	h.finishPod(ml.Name, 0, "")

	tags, err := testBed.Registry.Tags(h.ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) > 0 {
		t.Errorf("tags left in %s: %v (want none: no index, no per-platform tag)", repo, tags)
	}
	if got := h.get(); got.Status.Phase != buildv1.BuildPhaseFailed || got.Status.Reason != buildv1.StatusReasonPlatformBuildFailed {
		t.Errorf("the build is %s (%s) after the cleanup, want Failed (PlatformBuildFailed)", got.Status.Phase, got.Status.Reason)
	}
	h.waitTagsCondition(metav1.ConditionTrue, buildv1.ReasonPlatformTagsRemoved, func(msg string) bool {
		return strings.Contains(msg, "v1-linux-arm64")
	})
}

// runPodBuilder runs the command of a build pod's container with the real
// builder binary, as the bed's pod runner would: the pod's BUILD, the bed's
// kubeconfig in place of a service account.
func runPodBuilder(h *harness, pod *corev1.Pod) ([]byte, error) {
	bin, err := builderBinary()
	if err != nil {
		return nil, err
	}
	c := pod.Spec.Containers[0]
	if len(c.Command) < 2 || c.Command[0] != "builder" {
		return nil, errors.New("pod " + pod.Name + " does not run builder: " + strings.Join(c.Command, " "))
	}
	cmd := exec.CommandContext(h.ctx, bin, append(slices.Clone(c.Command[1:]), c.Args...)...)
	env := append(os.Environ(), "KUBECONFIG="+testBed.Kubeconfig)
	for _, e := range c.Env {
		if e.Name == buildv1.BuildEnv {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	cmd.Env = env
	return cmd.CombinedOutput()
}

// waitTagsCondition waits until the Build's PlatformTagsRemoved condition
// has status and reason and a message msgOK accepts.
func (h *harness) waitTagsCondition(status metav1.ConditionStatus, reason string, msgOK func(string) bool) {
	h.t.Helper()
	var last buildv1.BuildCondition
	err := wait.PollUntilContextTimeout(h.ctx, 20*time.Millisecond, bed.DefaultTimeout, true, func(ctx context.Context) (bool, error) {
		b := &buildv1.Build{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: h.build}, b); err != nil {
			return false, err
		}
		for _, c := range b.Status.Conditions {
			if c.Type == buildv1.BuildConditionPlatformTagsRemoved {
				last = c
				return string(c.Status) == string(status) && c.Reason == reason && msgOK(c.Message), nil
			}
		}
		return false, nil
	})
	if err != nil {
		h.t.Fatalf("waiting for condition %s %s %s: have %+v", buildv1.BuildConditionPlatformTagsRemoved, status, reason, last)
	}
}
