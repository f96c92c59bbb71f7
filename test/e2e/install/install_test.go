// Package install installs archway onto the bed the way a cluster
// administrator does, with `kubectl archway install` (the steps of
// `kubectl apply -k`, the CRDs first), and runs every component as
// pods under its own service account (the pod runner maps archway's images
// to the locally built binaries and gives each pod its service account's
// token), so that the shipped RBAC, wiring and uninstall order are what is
// tested.
package install

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

const namespace = framework.InstallNamespace

// TestInstall installs manifests/default (through an overlay that adds
// only what the bed needs: the bed's registry
// and git settings in the config file, and pod-IP addresses for the
// components' listeners, since the runner's pods share the host's network)
// with kubectl archway install, and then: a four-platform build runs end to end; a pod is
// gated and placed; deleting the ClusterPodPlacementConfig releases a pod
// still gated; removing any one RBAC rule makes some case fail
// (leastPrivilege, rbac_test.go); `kubectl delete -k` leaves no webhook
// configuration, no gated pod and no object held by a finalizer, and
// keeps the CRDs and the users' Builds, BuildConfigs and policies, which
// `kubectl delete -k manifests/crd` then removes. It prints the time from
// `kubectl archway install` to the first four-platform build complete.
func TestInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("installs every component")
	}
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 35*time.Minute)
	defer cancel()
	bins, err := framework.BuildBinaries(ctx, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	ib, err := framework.StartInstallBed(ctx, bins, t.TempDir(), bed.Options{
		// The least-privilege proof reads who was refused what; OpenShift
		// checks blockOwnerDeletion.
		AuditServiceAccounts:                 true,
		OwnerReferencesPermissionEnforcement: true,
	})
	g.Expect(err).NotTo(HaveOccurred())
	b := ib.Bed
	t.Cleanup(func() { _ = b.Stop() })
	t.Cleanup(func() {
		if t.Failed() {
			framework.DumpPods(t.Logf, b)
		}
	})
	overlay, err := ib.WriteOverlay(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	kubectl := func(args ...string) (string, error) { return ib.Kubectl(ctx, args...) }

	// The install of docs/admin-guide/install.md, with kubectl archway
	// install: where nothing serves build.openshift.io it applies
	// manifests/crd, waits until the CRDs are established, then the
	// overlay.
	start := time.Now()
	out, err := ib.InstallWithPlugin(ctx, overlay)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("installing archway's own Build API"))
	g.Expect(out).To(ContainSubstring("customresourcedefinition/builds.build.openshift.io serverside-applied"))
	t.Logf("installed: every Deployment's pods run and every webhook serves %v after kubectl archway install", time.Since(start).Round(time.Millisecond))

	t.Run("four-platform build", func(t *testing.T) {
		g := NewWithT(t)
		bctx, cancel := context.WithTimeout(ctx, framework.InstallTimeout)
		defer cancel()
		done, _, err := framework.BuildHello(bctx, b, t.TempDir(), "install/hello")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(done.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", done.Status.Message, done.Status.Platforms)
		t.Logf("kubectl archway install to the first four-platform build complete: %v", time.Since(start).Round(time.Millisecond))
		g.Expect(done.Status.Platforms).To(HaveLen(4))
		for _, e := range done.Status.Platforms {
			g.Expect(e.Phase).To(Equal(buildv1.BuildPhaseComplete), "%s", e.Platform)
		}
	})

	t.Run("gated pod placed", func(t *testing.T) {
		g := NewWithT(t)
		ns, err := b.CreateNamespace(ctx, "placed")
		g.Expect(err).NotTo(HaveOccurred())
		pod := testPod(ns, "placed", b.BaseImage)
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		// Gated at admission by the webhook's pods...
		g.Expect(pod.Spec.SchedulingGates).To(ContainElement(corev1.PodSchedulingGate{Name: placement.SchedulingGate}))
		// ...placed by the controller's.
		got := &corev1.Pod{}
		g.Expect(bed.WaitFor(ctx, b.Client, client.ObjectKeyFromObject(pod), got, func(p *corev1.Pod) bool {
			return p.Spec.NodeName != ""
		})).To(Succeed())
		g.Expect(got.Spec.SchedulingGates).To(BeEmpty())
		g.Expect(got.Labels).To(HaveKeyWithValue(placement.SchedulingGateLabel, placement.SchedulingGateLabelRemoved))
		g.Expect(got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution).NotTo(BeNil())
	})

	t.Run("config deleted releases gated pods", func(t *testing.T) {
		g := NewWithT(t)
		ns, err := b.CreateNamespace(ctx, "released")
		g.Expect(err).NotTo(HaveOccurred())
		pod := testPod(ns, "waiting", unreachableImage(t))
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		g.Expect(pod.Spec.SchedulingGates).NotTo(BeEmpty())
		// A placement controller pod that ended (evicted, say) is never
		// deleted: the operator must not wait for it to go.
		ended := testPod(namespace, "ended-placement-controller", b.BaseImage)
		ended.Labels["app.kubernetes.io/name"] = placement.ControllerName
		ended.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "bed.archway.dev/never"}}
		g.Expect(b.Client.Create(ctx, ended)).To(Succeed())
		ended.Status.Phase, ended.Status.Reason = corev1.PodFailed, "Evicted"
		g.Expect(b.Client.Status().Update(ctx, ended)).To(Succeed())
		cfg := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName}}
		g.Expect(b.Client.Delete(ctx, cfg)).To(Succeed())
		got := &corev1.Pod{}
		g.Expect(bed.WaitFor(ctx, b.Client, client.ObjectKeyFromObject(pod), got, func(p *corev1.Pod) bool {
			return len(p.Spec.SchedulingGates) == 0
		})).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(b.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg))
		}).WithContext(ctx).WithTimeout(bed.LongTimeout).Should(BeTrue(), "the config is held: %+v", cfg.ObjectMeta)
		// The placement operator let it go once the operand was stopped:
		// no placement pod runs, and none holds a cluster-wide right.
		g.Expect(operandStopped(ctx, b.Client)).To(Succeed())
		// A new pod is neither gated nor blocked (the gate webhook has no
		// endpoint and fails open).
		free := testPod(ns, "free", b.BaseImage)
		g.Expect(b.Client.Create(ctx, free)).To(Succeed())
		g.Expect(free.Spec.SchedulingGates).To(BeEmpty())

		// Placement on again, for the uninstall, as an upgrade applies: the
		// placement controller owns the gate webhook's namespaceSelector.
		_, err = kubectl("apply", "--server-side", "--force-conflicts", "-k", overlay)
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() []string {
			_ = b.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)
			return cfg.Finalizers
		}).WithContext(ctx).WithTimeout(bed.LongTimeout).Should(ContainElements(placement.ConfigFinalizer, placement.OperandFinalizer))
		// The operator bound the roles and scaled both Deployments back up
		// (the apply leaves their replicas to it): pods are gated and
		// placed again.
		for _, name := range operands {
			g.Expect(b.Client.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRoleBinding{})).To(Succeed())
		}
		g.Eventually(func() bool {
			_ = b.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)
			return meta.IsStatusConditionFalse(cfg.Status.Conditions, multiarchv1beta1.ConditionPodPlacementControllerNotRolledOut) &&
				meta.IsStatusConditionFalse(cfg.Status.Conditions, multiarchv1beta1.ConditionPodPlacementWebhookNotRolledOut)
		}).WithContext(ctx).WithTimeout(bed.CaseTimeout).Should(BeTrue(), "conditions: %+v", cfg.Status.Conditions)
		for _, name := range operands {
			d := &appsv1.Deployment{}
			g.Expect(b.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d)).To(Succeed())
			g.Expect(d.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)), "Deployment %s", name)
		}
		placed := testPod(ns, "placed-again", b.BaseImage)
		g.Eventually(func() []corev1.PodSchedulingGate {
			p := placed.DeepCopy()
			p.Name = ""
			p.GenerateName = "placed-again-"
			g.Expect(b.Client.Create(ctx, p)).To(Succeed())
			placed = p
			return p.Spec.SchedulingGates
		}).WithContext(ctx).WithTimeout(bed.LongTimeout).ShouldNot(BeEmpty(), "no pod gated once placement is on again")
		g.Expect(bed.WaitFor(ctx, b.Client, client.ObjectKeyFromObject(placed), &corev1.Pod{}, func(p *corev1.Pod) bool {
			return p.Spec.NodeName != "" && p.Labels[placement.SchedulingGateLabel] == placement.SchedulingGateLabelRemoved
		})).To(Succeed())
	})

	// Each RBAC rule removed in turn makes some case fail (rbac_test.go).
	t.Run("least privilege", func(t *testing.T) {
		leastPrivilege(t, ctx, b, overlay)
	})

	t.Run("uninstall", func(t *testing.T) {
		g := NewWithT(t)
		ns, err := b.CreateNamespace(ctx, "uninstall")
		g.Expect(err).NotTo(HaveOccurred())
		pod := testPod(ns, "gated", unreachableImage(t))
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		g.Expect(pod.Spec.SchedulingGates).NotTo(BeEmpty(), "placement is on again")
		// The users' objects: the four-platform build's Build and
		// BuildConfig, and a policy of a namespace.
		var builds buildv1.BuildList
		g.Expect(b.Client.List(ctx, &builds)).To(Succeed())
		g.Expect(builds.Items).NotTo(BeEmpty(), "no Build to keep: the four-platform build made none")
		var configs buildv1.BuildConfigList
		g.Expect(b.Client.List(ctx, &configs)).To(Succeed())
		g.Expect(configs.Items).NotTo(BeEmpty(), "no BuildConfig to keep")
		policy := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kupid.gardener.cloud/v1alpha1", "kind": "PodSchedulingPolicy",
			"metadata": map[string]any{"namespace": ns, "name": "keep"},
			"spec":     map[string]any{"podSelector": map[string]any{}, "nodeSelector": map[string]any{"kubernetes.io/os": "linux"}},
		}}
		g.Expect(b.Client.Create(ctx, policy)).To(Succeed())
		kept := []client.Object{&builds.Items[0], &configs.Items[0], policy}
		crds := crdNames(t)

		// As docs/admin-guide/install.md says: the config first, so that the
		// placement controller releases the pods while its credentials
		// still work, then the components.
		out, err := kubectl("delete", "clusterpodplacementconfig", "cluster", "--ignore-not-found", "--timeout=3m")
		g.Expect(err).NotTo(HaveOccurred(), out)
		out, err = kubectl("delete", "-k", overlay, "--ignore-not-found", "--timeout=3m")
		g.Expect(err).NotTo(HaveOccurred(), out)
		got := &corev1.Pod{}
		g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
		g.Expect(got.Spec.SchedulingGates).To(BeEmpty(), "the pod is still gated")
		for _, w := range framework.WebhookConfigs {
			var obj client.Object = &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: w.Kind}}
			err := b.Client.Get(ctx, client.ObjectKey{Name: w.Name}, obj)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s %s is left: %v", w.Kind, w.Name, err)
		}
		// The operand's bindings, made by the operator, are deleted with
		// the ClusterRoles that own them.
		for _, name := range operands {
			g.Eventually(func() bool {
				return apierrors.IsNotFound(b.Client.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRoleBinding{}))
			}).WithContext(ctx).WithTimeout(bed.LongTimeout).Should(BeTrue(), "ClusterRoleBinding %s is left", name)
		}
		// kubectl delete waited for every object to be gone: nothing was
		// held by a finalizer. The namespace is gone too.
		err = b.Client.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace %s: %v", namespace, err)
		// The CRDs and the users' objects are not: they are removed on
		// their own (manifests/crd).
		for _, name := range crds {
			crd := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}}
			g.Expect(b.Client.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed(), "CRD %s deleted by uninstalling the components", name)
		}
		for _, obj := range kept {
			uid := obj.GetUID()
			g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed(), "%T %s deleted by uninstalling the components", obj, obj.GetName())
			g.Expect(obj.GetUID()).To(Equal(uid), "%T %s was made again", obj, obj.GetName())
		}

		// Removing the CRDs too, as docs/admin-guide/install.md says,
		// deletes every object of theirs: nothing holds them.
		out, err = kubectl("delete", "-k", filepath.Join(bed.RepoRoot(), "manifests", "crd"), "--timeout=2m")
		g.Expect(err).NotTo(HaveOccurred(), out)
		for _, name := range crds {
			crd := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}}
			err := b.Client.Get(ctx, client.ObjectKey{Name: name}, crd)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "CRD %s: %v", name, err)
		}
	})
}

// crdNames are the names of the CRDs manifests/crd installs.
func crdNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(bed.RepoRoot(), "manifests", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("manifests/crd/bases: %v, %d files", err, len(files))
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(data, &crd); err != nil || crd.Kind != "CustomResourceDefinition" || crd.Name == "" {
			t.Fatalf("%s: not a CRD (%v)", f, err)
		}
		names = append(names, crd.Name)
	}
	return names
}

// testPod is a pod the placement webhook gates (no node selection of its
// own) and the runner leaves alone (its image is mapped to no binary).
func testPod(ns, name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{bed.ManualPodLabel: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}},
	}
}

// unreachableImage names an image on a port nothing listens on: its
// inspection fails with connection refused, which placement retries, so
// the pod stays gated.
func unreachableImage(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr + "/nowhere/app:1"
}
