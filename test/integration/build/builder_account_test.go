package build

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	buildcontroller "github.com/archway-build/archway/pkg/build/controller"
)

// TestBuilderAccount: the first build of a namespace makes its builder
// service account and the RoleBinding of archway-builder to it (and to
// nothing else); the build pods run as builder, never as default; a Build
// that names its own service account gets no builder account made for it.
func TestBuilderAccount(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "account")
	h.cfg = testConfig(nil)
	h.ctrl = startController(t, h.ns, h.cfg)

	createBuild(func(b *buildv1.Build) { b.Spec.ServiceAccount = "deployer" }, amd64, arm64).do(h)
	wantPlatformPods(amd64, arm64).do(h)
	// The pods exist, so the reconcile that would have made the account
	// has run.
	if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "builder"}, &corev1.ServiceAccount{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Build running as deployer made the builder service account: %v", err)
	}
	if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: buildcontroller.BuilderClusterRole}, &rbacv1.RoleBinding{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Build running as deployer made the builder's RoleBinding: %v", err)
	}

	h2 := newHarness(t, "account")
	h2.cfg, h2.ctrl = h.cfg, startController(t, h2.ns, h.cfg)
	createBuild(nil, amd64, arm64).do(h2)
	pods := h2.waitPodNames(h2.platformPod(amd64), h2.platformPod(arm64), buildv1.ManifestListPodName(h2.build))
	for name, pod := range pods {
		if pod.Spec.ServiceAccountName != "builder" {
			t.Errorf("pod %s runs as %q, want builder", name, pod.Spec.ServiceAccountName)
		}
	}
	var sa corev1.ServiceAccount
	if err := k8s.Get(h2.ctx, client.ObjectKey{Namespace: h2.ns, Name: "builder"}, &sa); err != nil {
		t.Fatalf("the builder service account: %v", err)
	}
	var rb rbacv1.RoleBinding
	if err := k8s.Get(h2.ctx, client.ObjectKey{Namespace: h2.ns, Name: buildcontroller.BuilderClusterRole}, &rb); err != nil {
		t.Fatalf("the builder's RoleBinding: %v", err)
	}
	want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "builder", Namespace: h2.ns}}
	if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != buildcontroller.BuilderClusterRole || len(rb.Subjects) != 1 || rb.Subjects[0] != want[0] {
		t.Errorf("RoleBinding %s binds %+v to %+v, want %s to %+v", rb.Name, rb.RoleRef, rb.Subjects, buildcontroller.BuilderClusterRole, want)
	}
	var bindings rbacv1.RoleBindingList
	if err := k8s.List(h2.ctx, &bindings, client.InNamespace(h2.ns)); err != nil {
		t.Fatal(err)
	}
	for _, b := range bindings.Items {
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == "default" {
				t.Errorf("RoleBinding %s binds the default service account", b.Name)
			}
		}
	}
}
