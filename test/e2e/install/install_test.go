// Package install installs archway onto the bed the way a cluster
// administrator does, with `kubectl apply -k`, and runs every component as
// pods under its own service account (the pod runner maps archway's images
// to the locally built binaries and gives each pod its service account's
// token), so that the shipped RBAC, wiring and uninstall order are what is
// tested.
package install

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

const (
	namespace            = "archway-system"
	controllerRepository = "ghcr.io/archway-build/build-controller"
	installTimeout       = 3 * time.Minute
)

// servingSecrets are the Secrets (shipped empty) the webhook Deployments
// fill with their serving certificates (--cert-management=internal), with
// their Services, and webhookConfigs the webhook configurations (with how
// many webhooks each has) whose caBundle they inject: nobody provides
// either by hand.
var (
	servingSecrets = map[string]string{
		"archway-placement-webhook-tls":                "archway-placement-webhook",
		"archway-control-plane-protection-webhook-tls": "archway-control-plane-protection-webhook",
		"archway-scheduling-policy-webhook-tls":        "archway-scheduling-policy-webhook",
		"archway-build-triggers-tls":                   "archway-build-triggers",
	}
	webhookConfigs = []struct {
		kind, name string
		webhooks   int
	}{
		{"MutatingWebhookConfiguration", "archway-pod-placement", 1},
		{"ValidatingWebhookConfiguration", "archway-pod-placement-validation", 2},
		{"ValidatingWebhookConfiguration", "archway-control-plane-protection", 2},
		{"MutatingWebhookConfiguration", "archway-scheduling-policy", 1},
		{"ValidatingWebhookConfiguration", "archway-scheduling-policy-validation", 2},
	}
)

// TestInstall installs manifests/default (through an overlay that adds
// only what the bed needs: the bed's registry
// and git settings in the config file, and pod-IP addresses for the
// components' listeners, since the runner's pods share the host's network)
// with kubectl, and then: a four-platform build runs end to end; a pod is
// gated and placed; deleting the ClusterPodPlacementConfig releases a pod
// still gated; `kubectl delete -k` leaves no webhook configuration, no
// gated pod and no object held by a finalizer. It prints the time from
// `kubectl apply -k` to the first four-platform build complete.
func TestInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("installs every component")
	}
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	if err := bed.CheckQemu(); err != nil {
		t.Fatal(err)
	}
	bins, err := framework.BuildBinaries(ctx, t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	gitConfig := filepath.Join(t.TempDir(), "gitconfig")
	g.Expect(os.WriteFile(gitConfig, []byte("[safe]\n\tdirectory = *\n"), 0o644)).To(Succeed())
	g.Expect(bed.SearchableByOthers(filepath.Dir(gitConfig))).To(Succeed())

	b, err := bed.Start(ctx, bed.Options{
		ControllerManager: true,
		// kubectl installs the CRDs.
		CRDDirectoryPaths: []string{},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = b.Stop() })
	builderImage := b.Registry.Host + "/archway/builder:install"
	_, err = b.StartPodRunner(ctx, bed.RunnerOptions{
		Images: map[string]string{
			controllerRepository:          bins.Controller,
			imageRepository(builderImage): bins.Builder,
		},
		Env:             []string{"GIT_CONFIG_SYSTEM=" + gitConfig},
		InClusterConfig: true,
		PodIPs:          true,
	})
	g.Expect(err).NotTo(HaveOccurred())

	t.Cleanup(func() {
		if t.Failed() {
			dumpPods(t, b)
		}
	})
	overlay := writeOverlay(t, b, builderImage)
	kubectl := func(args ...string) (string, error) {
		bin, err := bed.Tool("kubectl")
		if err != nil {
			return "", err
		}
		cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", b.Kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}

	// The README's install sequence.
	start := time.Now()
	for _, args := range [][]string{
		{"apply", "--server-side", "-k", filepath.Join(bed.RepoRoot(), "manifests", "crd")},
		{"wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"},
		{"apply", "--server-side", "-k", overlay},
	} {
		_, err := kubectl(args...)
		g.Expect(err).NotTo(HaveOccurred())
	}
	waitInstalled(t, ctx, b)
	t.Logf("installed: every Deployment's pods run and every webhook serves %v after kubectl apply", time.Since(start).Round(time.Millisecond))

	t.Run("four-platform build", func(t *testing.T) {
		g := NewWithT(t)
		ns, err := b.CreateNamespace(ctx, "build")
		g.Expect(err).NotTo(HaveOccurred())
		uri, err := framework.GitRepo(filepath.Join(t.TempDir(), "repo"), map[string]string{
			"Dockerfile": "FROM " + b.BaseImage + "\nRUN uname -m > /machine\n",
		})
		g.Expect(err).NotTo(HaveOccurred())
		bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}}
		bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: uri, Ref: "main"}}
		bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
		bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: b.Registry.Host + "/install/hello:v1"}
		bc.Spec.Platforms = framework.Platforms
		g.Expect(b.Client.Create(ctx, bc)).To(Succeed())
		started, err := framework.StartBuild(ctx, b.Client, bc)
		g.Expect(err).NotTo(HaveOccurred())
		done := &buildv1.Build{}
		bctx, cancel := context.WithTimeout(ctx, installTimeout)
		defer cancel()
		g.Expect(bed.WaitFor(bctx, b.Client, client.ObjectKeyFromObject(started), done, func(b *buildv1.Build) bool {
			return b.Status.Phase.IsTerminal()
		})).To(Succeed())
		g.Expect(done.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", done.Status.Message, done.Status.Platforms)
		t.Logf("kubectl apply -k to the first four-platform build complete: %v", time.Since(start).Round(time.Millisecond))
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
		cfg := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName}}
		g.Expect(b.Client.Delete(ctx, cfg)).To(Succeed())
		got := &corev1.Pod{}
		g.Expect(bed.WaitFor(ctx, b.Client, client.ObjectKeyFromObject(pod), got, func(p *corev1.Pod) bool {
			return len(p.Spec.SchedulingGates) == 0
		})).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(b.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(BeTrue(), "the config is held: %+v", cfg.ObjectMeta)
		// Placement on again, for the uninstall, as an upgrade applies: the
		// placement controller owns the gate webhook's namespaceSelector.
		_, err = kubectl("apply", "--server-side", "--force-conflicts", "-k", overlay)
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() []string {
			_ = b.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg)
			return cfg.Finalizers
		}).WithContext(ctx).WithTimeout(time.Minute).Should(ContainElement(placement.ConfigFinalizer))
	})

	t.Run("uninstall", func(t *testing.T) {
		g := NewWithT(t)
		ns, err := b.CreateNamespace(ctx, "uninstall")
		g.Expect(err).NotTo(HaveOccurred())
		pod := testPod(ns, "gated", unreachableImage(t))
		g.Expect(b.Client.Create(ctx, pod)).To(Succeed())
		g.Expect(pod.Spec.SchedulingGates).NotTo(BeEmpty(), "placement is on again")
		out, err := kubectl("delete", "-k", overlay, "--timeout=3m")
		g.Expect(err).NotTo(HaveOccurred(), out)
		got := &corev1.Pod{}
		g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
		g.Expect(got.Spec.SchedulingGates).To(BeEmpty(), "the pod is still gated")
		for _, w := range webhookConfigs {
			var obj client.Object = &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: w.kind}}
			err := b.Client.Get(ctx, client.ObjectKey{Name: w.name}, obj)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s %s is left: %v", w.kind, w.name, err)
		}
		// kubectl delete waited for every object to be gone: nothing was
		// held by a finalizer. The namespace and CRDs are gone too.
		err = b.Client.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace %s: %v", namespace, err)
	})
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

// imageRepository is an image reference without its tag.
func imageRepository(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

// writeOverlay writes the bed's overlay of manifests/default into a new
// directory and returns it.
func writeOverlay(t *testing.T, b *bed.Bed, builderImage string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("config.yaml", fmt.Sprintf(`apiVersion: config.archway.dev/v1alpha1
kind: BuildControllerConfiguration
build:
  builderImage: %s
  allowFileGitURIs: true
placement:
  insecureRegistries: [%q]
`, builderImage, b.Registry.Host))
	// kustomize takes bases by relative path only.
	base, err := filepath.Rel(dir, filepath.Join(bed.RepoRoot(), "manifests", "default"))
	if err != nil {
		t.Fatal(err)
	}
	var k strings.Builder
	fmt.Fprintf(&k, `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
configMapGenerator:
- name: build-controller-config
  namespace: %s
  behavior: replace
  files: [config.yaml]
`, base, namespace)
	k.WriteString("patches:\n")
	// The runner's pods share the host's network: each component listens
	// on its own pod IP (later flags win), and the runner takes its pods.
	k.WriteString(`- target: {kind: Deployment}
  patch: |-
    - {op: add, path: /spec/template/metadata/labels/bed.archway.dev~1manual, value: "true"}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--metrics-bind-address=$(POD_IP):8443"}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--health-probe-bind-address=$(POD_IP):8081"}
    - {op: add, path: /spec/template/spec/containers/0/args/-, value: "--webhook-host=$(POD_IP)"}
- target: {kind: Deployment, name: "archway-placement-.*"}
  patch: |-
    - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}}
- target: {kind: Deployment, name: "build-controller|archway-build-triggers|archway-control-plane-protection|archway-scheduling-policy"}
  patch: |-
    - {op: add, path: /spec/template/spec/containers/0/env, value: [{name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}]}
`)
	// The order of manifests/default, which kubectl delete -k relies on.
	def, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "manifests", "default", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(def, []byte("\nsortOptions:"))
	if i < 0 {
		t.Fatal("manifests/default/kustomization.yaml has no sortOptions")
	}
	k.Write(def[i+1:])
	write("kustomization.yaml", k.String())
	return dir
}

// waitInstalled waits until every Deployment of archway's namespace has
// its pods running and every webhook Service's pods accept connections.
func waitInstalled(t *testing.T, ctx context.Context, b *bed.Bed) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	var last error
	for {
		if last = installed(ctx, b); last == nil {
			return
		}
		select {
		case <-ctx.Done():
			log, _ := os.ReadFile(b.LogPath("pod-runner"))
			t.Fatalf("archway is not running: %v\npod runner log (tail):\n%s", last, tail(string(log), 40))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func installed(ctx context.Context, b *bed.Bed) error {
	var deps appsv1.DeploymentList
	if err := b.Client.List(ctx, &deps, client.InNamespace(namespace)); err != nil {
		return err
	}
	if len(deps.Items) < 6 {
		return fmt.Errorf("%d Deployments", len(deps.Items))
	}
	var pods corev1.PodList
	if err := b.Client.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return err
	}
	running := map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			running[p.Labels["app.kubernetes.io/name"]]++
		}
	}
	for _, d := range deps.Items {
		if n := running[d.Spec.Selector.MatchLabels["app.kubernetes.io/name"]]; n < int(*d.Spec.Replicas) {
			return fmt.Errorf("deployment %s: %d of %d pods running", d.Name, n, *d.Spec.Replicas)
		}
	}
	// The certificates are made in-process: every Secret filled and every
	// webhook's caBundle injected.
	for name := range servingSecrets {
		var s corev1.Secret
		if err := b.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
			return err
		}
		if len(s.Data["tls.crt"]) == 0 || len(s.Data["tls.key"]) == 0 {
			return fmt.Errorf("secret %s holds no certificate", name)
		}
	}
	for _, w := range webhookConfigs {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("admissionregistration.k8s.io/v1")
		u.SetKind(w.kind)
		if err := b.Client.Get(ctx, client.ObjectKey{Name: w.name}, u); err != nil {
			return err
		}
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		if len(hooks) != w.webhooks {
			return fmt.Errorf("%s %s has %d webhooks, want %d", w.kind, w.name, len(hooks), w.webhooks)
		}
		for _, h := range hooks {
			hm, _ := h.(map[string]any)
			if bundle, _, _ := unstructured.NestedString(hm, "clientConfig", "caBundle"); bundle == "" {
				return fmt.Errorf("%s %s: no caBundle injected", w.kind, w.name)
			}
		}
	}
	for _, svc := range servingSecrets {
		var s corev1.Service
		if err := b.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: svc}, &s); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.PodIP == "" || !selects(s.Spec.Selector, p.Labels) {
				continue
			}
			c, err := net.DialTimeout("tcp", net.JoinHostPort(p.Status.PodIP, "9443"), time.Second)
			if err != nil {
				return fmt.Errorf("%s's pod %s does not serve: %w", svc, p.Name, err)
			}
			_ = c.Close()
		}
	}
	return nil
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// dumpPods logs every pod's phase and its log's tail, for a failed run.
func dumpPods(t *testing.T, b *bed.Bed) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var pods corev1.PodList
	if err := b.Client.List(ctx, &pods); err != nil {
		t.Log(err)
		return
	}
	bin, err := bed.Tool("kubectl")
	if err != nil {
		return
	}
	for _, kind := range []string{"endpoints", "endpointslices", "pods -o wide"} {
		out, _ := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", b.Kubeconfig, "get", "-n", namespace, "-o", "wide"}, strings.Fields(kind)...)...).CombinedOutput()
		t.Logf("%s:\n%s", kind, out)
	}
	if kcm, err := os.ReadFile(b.LogPath("kube-controller-manager")); err == nil {
		t.Logf("kube-controller-manager (tail):\n%s", tail(string(kcm), 30))
	}
	for _, p := range pods.Items {
		out, _ := exec.CommandContext(ctx, bin, "--kubeconfig", b.Kubeconfig, "logs", "-n", p.Namespace, p.Name, "--all-containers", "--tail=15").CombinedOutput()
		t.Logf("pod %s/%s on %s, %s, gates %v, ip %s:\n%s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase, p.Spec.SchedulingGates, p.Status.PodIP, out)
	}
}
