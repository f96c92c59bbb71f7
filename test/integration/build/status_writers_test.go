package build

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/bed"
)

// podNameExtra and podUIDExtra are the user info a service-account token
// bound to a pod carries: the pod's name and UID.
const (
	podNameExtra = "authentication.kubernetes.io/pod-name"
	podUIDExtra  = "authentication.kubernetes.io/pod-uid"
)

// installManifest creates the objects of a YAML file of the repository and
// returns them.
func installManifest(t *testing.T, ctx context.Context, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(bed.RepoRoot(), path))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := k8s.Create(ctx, u); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		objs = append(objs, u)
	}
	return objs
}

// writersPolicy installs a policy manifest of the repository for the case
// (removed when it ends) and lets the namespace's builder service account
// use verbs on resource, as its role grants in a cluster. It returns the
// policy's objects.
func (h *harness) writersPolicy(manifest, resource string, verbs ...string) []*unstructured.Unstructured {
	h.t.Helper()
	objs := installManifest(h.t, h.ctx, manifest)
	h.t.Cleanup(func() {
		for _, o := range objs {
			_ = k8s.Delete(context.Background(), o)
		}
	})
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: h.ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{buildv1.GroupName}, Resources: []string{resource}, Verbs: verbs}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: h.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "builder"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "builder", Namespace: h.ns}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(h.ctx, o); err != nil {
			h.t.Fatal(err)
		}
	}
	return objs
}

// writer is a client acting as the namespace's builder service account,
// from the pod of that name that exists (none: a token bound to no pod; a
// pod that does not exist: a made-up UID).
func (h *harness) writer(pod string) client.Client {
	h.t.Helper()
	uid := "00000000-0000-0000-0000-000000000000"
	p := &corev1.Pod{}
	if pod != "" && k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: pod}, p) == nil {
		uid = string(p.UID)
	}
	return h.writerWithUID(pod, uid)
}

// writerWithUID is writer with the pod's UID given.
func (h *harness) writerWithUID(pod, uid string) client.Client {
	h.t.Helper()
	cfg := rest.CopyConfig(testBed.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + h.ns + ":builder",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + h.ns, "system:authenticated"},
	}
	if pod != "" {
		cfg.Impersonate.Extra = map[string][]string{podNameExtra: {pod}, podUIDExtra: {uid}}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// applyStatusAs applies status fields of the case's Build through c, as
// manager.
func (h *harness) applyStatusAs(c client.Client, manager string, status map[string]any, opts ...client.SubResourceApplyOption) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": buildv1.GroupVersion.String(), "kind": "Build",
		"metadata": map[string]any{"name": h.build, "namespace": h.ns},
		"status":   status,
	}}
	return c.Status().Apply(h.ctx, client.ApplyConfigurationFromUnstructured(u),
		append([]client.SubResourceApplyOption{client.FieldOwner(manager), client.ForceOwnership}, opts...)...)
}

func entryStatus(p string, fields map[string]any) map[string]any {
	entry := map[string]any{"platform": p}
	for k, v := range fields {
		entry[k] = v
	}
	return map[string]any{"platforms": []any{entry}}
}

// TestStatusWriters: with manifests/build-controller's policy, a service
// account of the Build's namespace writes the Build's status only from the
// Build's own pods, each pod only its part, and a platform's entry only
// until it has ended. With the policy's binding gone, the same forged
// writes go through (so the test can fail).
func TestStatusWriters(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "writers")
	h.cfg = testConfig(nil)
	h.ctrl = startController(t, h.ns, h.cfg)
	// The builder service account may patch Build status, as its role
	// grants in a cluster.
	objs := h.writersPolicy("manifests/build-controller/status_writers_policy.yaml", "builds/status", "get", "patch", "update")
	createBuild(nil, amd64, arm64).do(h)
	wantPlatformPods(amd64, arm64).do(h)
	amdPod := h.platformPod(amd64)
	mlPod := buildv1.ManifestListPodName(h.build)
	running := map[string]any{"phase": "Running"}

	// The policy is in force once a write from no pod is refused.
	stranger := h.writer("")
	err := wait.PollUntilContextTimeout(h.ctx, 50*time.Millisecond, bed.DefaultTimeout, true, func(context.Context) (bool, error) {
		err := h.applyStatusAs(stranger, "x", entryStatus(amd64, running), client.DryRunAll)
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), nil
	})
	if err != nil {
		t.Fatal("the status writers policy never took effect")
	}

	refused := func(what string, err error, words string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), words) {
			t.Errorf("%s: got %v, want it refused saying %q", what, err, words)
		}
	}
	refused("a token bound to no pod", h.applyStatusAs(stranger, "x", entryStatus(amd64, running)), "only from one of the Build's pods")
	refused("a pod that is not the Build's", h.applyStatusAs(h.writer("intruder"), "x", entryStatus(amd64, running)), "is not a pod of Build")

	// build-controller records each pod's UID in the Build once the pod
	// exists; the builder waits for it.
	waitRecorded := func(what string, recorded func(*buildv1.Build) bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(h.ctx, 20*time.Millisecond, bed.DefaultTimeout, true, func(context.Context) (bool, error) {
			return recorded(h.get()), nil
		}); err != nil {
			t.Fatalf("build-controller never recorded %s", what)
		}
	}
	uidOf := func(name string) string { return string(h.pod(name).UID) }
	entryUID := func(p string) func(*buildv1.Build) bool {
		return func(b *buildv1.Build) bool {
			for _, e := range b.Status.Platforms {
				if e.Platform == p {
					return e.PodUID != "" && e.PodUID == uidOf(h.platformPod(p))
				}
			}
			return false
		}
	}
	waitRecorded("the amd64 pod's UID", entryUID(amd64))
	waitRecorded("the arm64 pod's UID", entryUID(arm64))
	waitRecorded("the manifest-list pod's UID", func(b *buildv1.Build) bool { return b.Status.PodUID == uidOf(mlPod) })

	// A pod with the name but another UID (one that took the name, or the
	// pod of another Build of that name) writes nothing.
	refused("a pod named like the amd64 pod, with another UID", h.applyStatusAs(h.writerWithUID(amdPod, "11111111-2222-3333-4444-555555555555"),
		"archway-builder-linux-amd64", entryStatus(amd64, running)), "that build-controller recorded")
	refused("a pod named like the manifest-list pod, with another UID", h.applyStatusAs(h.writerWithUID(mlPod, "11111111-2222-3333-4444-555555555555"),
		"archway-builder-manifest-list", map[string]any{"reason": "Forged"}), "that build-controller recorded")

	amd := h.writer(amdPod)
	if err := h.applyStatusAs(amd, "archway-builder-linux-amd64", entryStatus(amd64, running)); err != nil {
		t.Fatalf("the amd64 pod writing its own entry: %v", err)
	}
	refused("the amd64 pod recording another pod as its own", h.applyStatusAs(amd, "x",
		entryStatus(amd64, map[string]any{"podUID": "11111111-2222-3333-4444-555555555555"})), "may not change which pods")
	refused("the manifest-list pod recording another pod as the named one", h.applyStatusAs(h.writer(mlPod), "x",
		map[string]any{"podUID": "11111111-2222-3333-4444-555555555555"}), "may not change which pods")
	refused("the amd64 pod writing arm64's entry", h.applyStatusAs(amd, "x", entryStatus(arm64, map[string]any{"phase": "Complete"})), "only its own platform")
	refused("the amd64 pod writing the build's reason", h.applyStatusAs(amd, "x", map[string]any{"reason": "Forged"}), "only its own platform")
	// emulatedOn is build-controller's: a pod neither claims emulation nor
	// hides it.
	refused("the amd64 pod claiming emulation", h.applyStatusAs(amd, "archway-builder-linux-amd64",
		entryStatus(amd64, map[string]any{"phase": "Running", "emulatedOn": "arm64"})), "may not change emulatedOn")
	if err := h.applyStatusAs(k8s, "archway-build-controller-test", entryStatus(arm64, map[string]any{"emulatedOn": "amd64"})); err != nil {
		t.Fatalf("build-controller's role writing emulatedOn: %v", err)
	}
	arm := h.writer(h.platformPod(arm64))
	if err := h.applyStatusAs(arm, "archway-builder-linux-arm64", entryStatus(arm64, running)); err != nil {
		t.Fatalf("the emulated arm64 pod writing its own entry: %v", err)
	}
	refused("the emulated arm64 pod hiding its emulation", h.applyStatusAs(arm, "archway-builder-linux-arm64",
		entryStatus(arm64, map[string]any{"phase": "Running", "emulatedOn": "arm64"})), "may not change emulatedOn")

	ml := h.writer(mlPod)
	digest := "sha256:" + strings.Repeat("ab", 32)
	if err := h.applyStatusAs(ml, "archway-builder-manifest-list", map[string]any{"output": map[string]any{"to": map[string]any{"imageDigest": digest}}}); err != nil {
		t.Fatalf("the manifest-list pod writing the output: %v", err)
	}
	refused("the manifest-list pod writing a platform's entry", h.applyStatusAs(ml, "x", entryStatus(arm64, map[string]any{"phase": "Complete"})), "not its platforms")
	refused("the manifest-list pod writing the phase", h.applyStatusAs(ml, "x", map[string]any{"phase": "Complete"}), "not its platforms")

	// A cancel ends every platform; a builder still running cannot turn
	// its platform Complete afterwards.
	cancelBuild().do(h)
	wantEntry(amd64, buildv1.BuildPhaseCancelled, buildv1.StatusReasonCancelledBuild).do(h)
	refused("the amd64 pod writing Complete after the cancel", h.applyStatusAs(amd, "archway-builder-linux-amd64",
		entryStatus(amd64, map[string]any{"phase": "Complete"})), "its entry is final")

	// Without the binding the same forged write goes through.
	for _, o := range objs {
		if o.GetKind() == "ValidatingAdmissionPolicyBinding" {
			if err := k8s.Delete(h.ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = wait.PollUntilContextTimeout(h.ctx, 50*time.Millisecond, bed.DefaultTimeout, true, func(context.Context) (bool, error) {
		return h.applyStatusAs(h.writer("intruder"), "x", entryStatus(arm64, map[string]any{"message": "forged"}), client.DryRunAll) == nil, nil
	})
	if err != nil {
		t.Error("with the policy unbound, a forged write is still refused: the checks above prove nothing")
	}
}
