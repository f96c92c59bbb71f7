package build

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/bed"
)

// TestControllerRestartMidFanOut plays a controller that dies in the middle
// of fanning out ten four-platform builds: its client creates 13 pods and
// then fails every create, as if the process had been killed. A new
// controller must finish the job: every build ends with exactly its four
// pods and its manifest-list pod (the 13 kept: no pod is made twice) and
// completes. Which pods the 13 are depends on how the eight workers'
// creates interleave: TestRestartAfterEveryPlatformPod pins the case that
// once made this one fail.
func TestControllerRestartMidFanOut(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "restart")
	cfg := testConfig(nil)
	var mu sync.Mutex
	allowed := 13
	first := startControllerWith(t, h.ns, cfg, &interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				mu.Lock()
				defer mu.Unlock()
				if allowed == 0 {
					return errors.New("injected: the controller died")
				}
				allowed--
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	const n = 10
	for i := range n {
		h.create(h.buildObj(fmt.Sprintf("app-%d", i), fourPlatforms...))
	}
	var before []corev1.Pod
	err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, bed.DefaultTimeout, true, func(ctx context.Context) (bool, error) {
		var list corev1.PodList
		if err := k8s.List(ctx, &list, client.InNamespace(h.ns)); err != nil {
			return false, nil
		}
		before = list.Items
		return len(list.Items) == 13, nil
	})
	if err != nil {
		t.Fatalf("the first controller did not create 13 pods: %d", len(before))
	}
	first.stop()
	var list corev1.PodList
	if err := k8s.List(h.ctx, &list, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	before = list.Items
	uids := map[string]types.UID{}
	for _, p := range before {
		uids[p.Name] = p.UID
	}
	t.Logf("controller stopped with %d of %d pods created", len(before), 5*n)

	startController(t, h.ns, cfg)
	for i := range n {
		h.build = fmt.Sprintf("app-%d", i)
		var want []string
		for _, p := range fourPlatforms {
			want = append(want, h.platformPod(p))
		}
		pods := h.waitPodNames(append(want, buildv1.ManifestListPodName(h.build))...)
		for name, uid := range uids {
			if p, ok := pods[name]; ok && p.UID != uid {
				t.Errorf("pod %s was made again after the restart", name)
			}
		}
	}
	var all corev1.PodList
	if err := k8s.List(h.ctx, &all, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 5*n {
		t.Errorf("%d pods, want %d (four platforms and the manifest-list pod each)", len(all.Items), 5*n)
	}
	for i := range n {
		h.build = fmt.Sprintf("app-%d", i)
		for _, p := range fourPlatforms {
			h.startPlatform(p)
			h.succeedPlatform(p)
		}
		h.waitPodNames(append(podNames(h, fourPlatforms...), buildv1.ManifestListPodName(h.build))...)
		finishManifestList(0, "").do(h)
		h.waitPhase(buildv1.BuildPhaseComplete, "")
	}
}

// TestRestartAfterEveryPlatformPod: the controller made a Build's four
// platform pods and died before its manifest-list pod (and before the
// status write). The restarted controller makes the manifest-list pod at
// once, as the fan-out would have: it does not wait for the platforms to
// end as it does for a manifest-list pod that was gone once the status
// showed the fan-out.
func TestRestartAfterEveryPlatformPod(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "restart-ml")
	cfg := testConfig(nil)
	h.build = "app"
	ml := buildv1.ManifestListPodName(h.build)
	// The manifest-list pod's create fails, and every status write after
	// it: the platform pods' creates, made at the same time, go through.
	var mu sync.Mutex
	dead := false
	first := startControllerWith(t, h.ns, cfg, &interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if pod, ok := obj.(*corev1.Pod); ok && pod.Name == ml {
				mu.Lock()
				defer mu.Unlock()
				dead = true
				return errors.New("injected: the controller died")
			}
			return c.Create(ctx, obj, opts...)
		},
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			mu.Lock()
			defer mu.Unlock()
			if dead {
				return errors.New("injected: the controller died")
			}
			return c.SubResource(sub).Apply(ctx, obj, opts...)
		},
	})
	h.create(h.buildObj(h.build, fourPlatforms...))
	h.waitPodNames(podNames(h, fourPlatforms...)...)
	first.stop()
	if b := h.get(); len(b.Status.Platforms) > 0 && b.Status.Platforms[0].Phase != buildv1.BuildPhaseNew {
		t.Fatalf("the dead controller recorded the fan-out (%+v): the case needs its entries New", b.Status.Platforms)
	}

	startController(t, h.ns, cfg)
	h.waitPodNames(append(podNames(h, fourPlatforms...), ml)...)
}

func podNames(h *harness, platforms ...string) []string {
	var out []string
	for _, p := range platforms {
		out = append(out, h.platformPod(p))
	}
	return out
}

// TestDeletingABuildDeletesItsPods checks the owner references: with
// kube-controller-manager's garbage collector, deleting a Build deletes its
// pods.
func TestDeletingABuildDeletesItsPods(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "gc")
	startController(t, h.ns, testConfig(nil))
	h.create(h.buildObj("app", amd64, arm64))
	wantPlatformPods(amd64, arm64).do(h)
	startPlatforms(amd64, arm64).do(h)
	if err := k8s.Delete(h.ctx, h.get()); err != nil {
		t.Fatal(err)
	}
	wantPodsDeleted(podNames(h, amd64, arm64)...).do(h)
}

// TestMissingPushSecret checks that a build whose push secret does not
// exist waits, New with reason MissingPushSecret and no pod, and starts
// once the secret exists.
func TestMissingPushSecret(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "secret")
	h.ctrl = startController(t, h.ns, testConfig(nil))
	b := h.buildObj("app", amd64, arm64)
	b.Spec.Output.PushSecret = &corev1.LocalObjectReference{Name: "push"}
	h.create(b)
	h.waitPhase(buildv1.BuildPhaseNew, buildv1.StatusReasonMissingPushSecret)
	wantNoPods().do(h)
	secret := &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	secret.Name, secret.Namespace = "push", h.ns
	if err := k8s.Create(h.ctx, secret); err != nil {
		t.Fatal(err)
	}
	wantPlatformPods(amd64, arm64).do(h)
	pod := h.pod(h.platformPod(amd64))
	found := false
	for _, v := range pod.Spec.Volumes {
		found = found || (v.Secret != nil && v.Secret.SecretName == "push")
	}
	if !found {
		t.Errorf("push secret not mounted: %+v", pod.Spec.Volumes)
	}
	h.waitPhase(buildv1.BuildPhasePending, "")
}
