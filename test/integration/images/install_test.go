package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ktypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/build/plugin"
	"github.com/archway-build/archway/pkg/emulation"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

// TestInstallOnRealNode installs the release overlay of the images make
// images built (pinned by digest) with kubectl onto the bed's real node:
// every component runs as a real container under containerd and runc,
// pulled by digest, under its own service account, with the manifests'
// probes, limits and security contexts, its webhooks reached by the
// apiserver through their Services. Then a pod whose image is for this
// machine's architecture only is gated by the placement webhook, placed by
// the placement controller (which inspected its image in the registry),
// bound to the real node and started by the kubelet.
func TestInstallOnRealNode(t *testing.T) {
	// make images, shared by the suite, may compile for many minutes on a
	// cold or busy machine; the install's own budget starts after it.
	registry := makeImages(t)
	ctx, cancel := context.WithTimeout(t.Context(), bed.BuildTimeout)
	defer cancel()
	release := filepath.Join(t.TempDir(), "release")
	if msg, err := runRelease(ctx, releaseManifestsProgram(t), registry, "test", release); err != nil {
		t.Fatalf("release-manifests: %v\n%s", err, msg)
	}
	cfgData, err := os.ReadFile(filepath.Join(release, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configv1alpha1.Parse(cfgData)
	if err != nil {
		t.Fatal(err)
	}
	overlay := writeRealNodeOverlay(t, release, cfg.Build.BuilderImage)
	t.Cleanup(func() {
		if t.Failed() {
			framework.DumpPods(t.Logf, testBed)
			dumpRestarts(t)
		}
	})
	start := time.Now()
	for _, args := range [][]string{
		{"apply", "--server-side", "--force-conflicts", "-k", filepath.Join(bed.RepoRoot(), "manifests", "crd")},
		{"wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"},
		{"apply", "--server-side", "-k", overlay},
	} {
		if _, err := framework.BedKubectl(ctx, testBed, args...); err != nil {
			t.Fatal(err)
		}
	}
	// Uninstalled at the end as an administrator does, so that the suite's
	// other tests find the bed as it was (the CRDs installed, no archway
	// objects); a leftover fails this test.
	t.Cleanup(func() { uninstall(t, overlay) })
	if err := framework.WaitInstalled(ctx, testBed); err != nil {
		t.Fatal(err)
	}
	t.Logf("installed in %s", time.Since(start).Round(100*time.Millisecond))

	controllerImage := pinnedImage(t, release, "build-controller")
	var pods corev1.PodList
	if err := testBed.Client.List(ctx, &pods, client.InNamespace(framework.InstallNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != testBed.Node.Name {
			t.Errorf("pod %s runs on %s, not the real node", p.Name, p.Spec.NodeName)
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if !strings.HasPrefix(cs.ContainerID, "containerd://") || cs.State.Running == nil {
				t.Errorf("pod %s container %s: %s, %+v: not a running containerd container", p.Name, cs.Name, cs.ContainerID, cs.State)
			}
			if cs.ImageID != controllerImage {
				t.Errorf("pod %s runs image %s, want the release's %s", p.Name, cs.ImageID, controllerImage)
			}
		}
	}

	// Placement is on once the controller says the webhook follows the
	// ClusterPodPlacementConfig.
	var cppc multiarchv1beta1.ClusterPodPlacementConfig
	if err := bed.WaitFor(ctx, testBed.Client, client.ObjectKey{Name: multiarchv1beta1.ClusterPodPlacementConfigName}, &cppc,
		func(c *multiarchv1beta1.ClusterPodPlacementConfig) bool {
			return meta.IsStatusConditionTrue(c.Status.Conditions, multiarchv1beta1.ConditionAvailable)
		}); err != nil {
		t.Fatal(err)
	}
	// A pod for this machine's architecture only, in a namespace of its
	// own: the placement webhook gates it, the controller inspects its
	// image and requires the architecture, the kubelet starts it.
	image, err := testBed.PushProgramImage(ctx, "./test/bed/cmd/pause", "tests/pause:"+runtime.GOARCH, runtime.GOARCH, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := testBed.CreateNamespace(ctx, "placed-")
	if err != nil {
		t.Fatal(err)
	}
	var sa corev1.ServiceAccount
	if err := bed.WaitFor(ctx, testBed.Client, client.ObjectKey{Namespace: ns, Name: "default"}, &sa, func(*corev1.ServiceAccount) bool { return true }); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "placed"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: image}}},
	}
	// The webhook gates only while it sees the placement controller's
	// heartbeat (else nobody would remove the gate): wait until a dry run
	// of the pod comes back gated.
	for {
		probe := pod.DeepCopy()
		if err := testBed.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(probe.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == placement.SchedulingGate }) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the placement webhook never gated a dry run of the pod (labels %v)", probe.Labels)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := testBed.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == placement.SchedulingGate }) {
		t.Fatalf("the placement webhook did not gate the pod: gates %v", pod.Spec.SchedulingGates)
	}
	var running corev1.Pod
	if err := bed.WaitFor(ctx, testBed.Client, client.ObjectKeyFromObject(pod), &running, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning
	}); err != nil {
		t.Fatal(err)
	}
	if running.Spec.NodeName != testBed.Node.Name {
		t.Errorf("placed pod runs on %s, want the real node %s", running.Spec.NodeName, testBed.Node.Name)
	}
	aff := running.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		!strings.Contains(fmt.Sprint(aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution), runtime.GOARCH) {
		t.Errorf("placed pod's affinity %+v does not require %s", aff, runtime.GOARCH)
	}
	cs := running.Status.ContainerStatuses
	if len(cs) != 1 || !strings.HasPrefix(cs[0].ContainerID, "containerd://") || !strings.Contains(cs[0].ImageID, "@sha256:") {
		t.Errorf("placed pod's container %+v: not started by containerd from a digest", cs)
	}

	fourPlatformBuild(ctx, t, release)
}

// fourPlatformBuild installs the release's emulation DaemonSet, which
// labels the real node as emulating the other architectures, and runs a
// four-platform Build through the installed build-controller: every
// platform's pod is a real unprivileged container on the real node (this
// machine's platform natively, the others' RUN steps under qemu), the
// manifest-list pod pushes the index, and each child's RUN step ran on its
// architecture.
func fourPlatformBuild(ctx context.Context, t *testing.T, release string) {
	t.Helper()
	if _, err := framework.BedKubectl(ctx, testBed, "apply", "--server-side", "-k", filepath.Join(release, "emulation")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = framework.BedKubectl(context.Background(), testBed, "delete", "-k", filepath.Join(release, "emulation"), "--wait", "--timeout=120s")
	})
	var node corev1.Node
	if err := bed.WaitFor(ctx, testBed.Client, client.ObjectKey{Name: testBed.Node.Name}, &node, func(n *corev1.Node) bool {
		return n.Labels[emulation.Label("arm64")] == "true" && n.Labels[emulation.Label("ppc64le")] == "true" && n.Labels[emulation.Label("s390x")] == "true"
	}); err != nil {
		t.Fatalf("the emulation DaemonSet did not label the real node: %v", err)
	}
	ns, err := testBed.CreateNamespace(ctx, "build-")
	if err != nil {
		t.Fatal(err)
	}
	var sa corev1.ServiceAccount
	if err := bed.WaitFor(ctx, testBed.Client, client.ObjectKey{Namespace: ns, Name: "default"}, &sa, func(*corev1.ServiceAccount) bool { return true }); err != nil {
		t.Fatal(err)
	}
	// OpenShift makes the builder service account in every namespace.
	if err := testBed.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: configv1alpha1.DefaultBuilderServiceAccount}}); err != nil {
		t.Fatal(err)
	}
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}}
	b.Spec.Source = buildv1.BuildSource{Dockerfile: ptr.To("FROM " + testBed.BaseImage + "\nRUN uname -m > /machine\n")}
	b.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
	b.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: testBed.Registry.Host + "/realnode/hello:v1"}
	b.Spec.Platforms = []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
	start := time.Now()
	if err := testBed.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	// `kubectl archway logs -f` from the Build's creation: it streams every
	// platform's log from the real kubelet as the pods run, and ends by
	// itself when the Build does.
	var followed bytes.Buffer
	follow := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &followed, ErrOut: &followed})
	follow.SetArgs([]string{"logs", "-f", "build/" + b.Name, "--kubeconfig", testBed.Kubeconfig, "-n", ns})
	followErr := make(chan error, 1)
	go func() { followErr <- follow.ExecuteContext(ctx) }()
	var done buildv1.Build
	if err := bed.WaitFor(ctx, testBed.Client, client.ObjectKeyFromObject(b), &done, func(b *buildv1.Build) bool { return b.Status.Phase.IsTerminal() }); err != nil {
		t.Fatal(err)
	}
	if done.Status.Phase != buildv1.BuildPhaseComplete {
		t.Fatalf("build %s: %s; platforms %+v", done.Status.Phase, done.Status.Message, done.Status.Platforms)
	}
	t.Logf("four-platform build on the real node (three under qemu): %s", time.Since(start).Round(100*time.Millisecond))
	select {
	case err := <-followErr:
		if err != nil {
			t.Errorf("kubectl archway logs -f: %v\n%s", err, followed.String())
		}
	case <-ctx.Done():
		t.Fatalf("kubectl archway logs -f did not end with the build:\n%s", followed.String())
	}
	for _, p := range b.Spec.Platforms {
		var lines []string
		for line := range strings.SplitSeq(followed.String(), "\n") {
			if strings.HasPrefix(line, "["+p+"] ") {
				lines = append(lines, line)
			}
		}
		if !strings.Contains(strings.Join(lines, "\n"), "uname -m > /machine") {
			t.Errorf("kubectl archway logs -f shows no RUN step of %s:\n%s", p, followed.String())
		}
	}
	// kubectl logs reads the same log from the kubelet.
	amd64Pod := buildv1.PlatformPodName(b.Name, "linux/amd64")
	if out, err := framework.BedKubectl(ctx, testBed, "logs", "-n", ns, amd64Pod); err != nil || !strings.Contains(out, "uname -m > /machine") {
		t.Errorf("kubectl logs %s: %v\n%s", amd64Pod, err, out)
	}
	var pods corev1.PodList
	if err := testBed.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != testBed.Node.Name || len(p.Status.ContainerStatuses) == 0 || !strings.HasPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://") {
			t.Errorf("build pod %s ran on %s, not as a real container on the real node", p.Name, p.Spec.NodeName)
		}
	}
	img, err := testBed.Registry.OpenImage(ctx, b.Spec.Output.To.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	index, _, err := img.Index(ctx)
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]string{"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le", "s390x": "s390x"}
	for _, d := range index.Manifests {
		if d.Platform == nil || machines[d.Platform.Architecture] == "" {
			continue
		}
		got, err := img.TopLayerFile(ctx, d.Digest, "/machine")
		if err != nil {
			t.Errorf("%s: %v", d.Platform.Architecture, err)
			continue
		}
		if strings.TrimSpace(got) != machines[d.Platform.Architecture] {
			t.Errorf("the %s image's RUN step ran on %q", d.Platform.Architecture, strings.TrimSpace(got))
		}
		delete(machines, d.Platform.Architecture)
	}
	if len(machines) != 0 {
		t.Errorf("the index lacks %v", machines)
	}
}

// pinnedImage is the reference by digest the release overlay gives an
// image (its images: entry for <registry>/name).
func pinnedImage(t *testing.T, release, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(release, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k ktypes.Kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	for _, img := range k.Images {
		if strings.HasSuffix(img.NewName, "/"+name) && img.Digest != "" {
			return img.NewName + "@" + img.Digest
		}
	}
	t.Fatalf("the release overlay pins no %s:\n%s", name, data)
	return ""
}

// writeRealNodeOverlay writes the bed's overlay of the release overlay: its
// configuration names the release's builder and tells placement that the
// bed's registry speaks plain HTTP, and every Deployment is pinned to the
// real node (the kwok nodes run nothing).
func writeRealNodeOverlay(t *testing.T, release, builderImage string) string {
	t.Helper()
	dir := t.TempDir()
	config := fmt.Sprintf(`apiVersion: config.archway.dev/v1alpha1
kind: BuildControllerConfiguration
build:
  builderImage: %s
  emulation:
    platforms:
    - {platform: linux/arm64, hostArchitectures: [amd64]}
    - {platform: linux/ppc64le, hostArchitectures: [amd64]}
    - {platform: linux/s390x, hostArchitectures: [amd64]}
placement:
  insecureRegistries: [%q]
`, builderImage, testBed.Registry.Host)
	patches := fmt.Sprintf(`- target: {kind: Deployment}
  patch: |-
    - {op: add, path: /spec/template/spec/nodeSelector, value: {kubernetes.io/hostname: %s}}
`, testBed.Node.Name)
	if err := framework.WriteOverlayFiles(dir, release, config, patches); err != nil {
		t.Fatal(err)
	}
	return dir
}

// dumpRestarts logs why archway's containers last ended, with the end of
// their previous log.
func dumpRestarts(t *testing.T) {
	ctx := context.Background()
	var pods corev1.PodList
	if err := testBed.Client.List(ctx, &pods, client.InNamespace(framework.InstallNamespace)); err != nil {
		t.Log(err)
		return
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount == 0 {
				continue
			}
			t.Logf("pod %s container %s restarted %d times; last ended: %+v", p.Name, cs.Name, cs.RestartCount, cs.LastTerminationState.Terminated)
			log, err := testBed.Clientset.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, Previous: true, TailLines: ptr.To(int64(10))}).DoRaw(ctx)
			t.Logf("previous log (%v):\n%s", err, log)
		}
	}
	if data, err := os.ReadFile(testBed.LogPath("kube-apiserver")); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "webhook") {
				t.Logf("kube-apiserver: %s", line)
			}
		}
	}
	var events corev1.EventList
	if err := testBed.Client.List(ctx, &events, client.InNamespace(framework.InstallNamespace)); err == nil {
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning {
				t.Logf("event %s %s: %s (x%d)", e.InvolvedObject.Name, e.Reason, e.Message, e.Count)
			}
		}
	}
}

// uninstall uninstalls as docs/admin-guide/install.md says, on the real
// node: the ClusterPodPlacementConfig first (the placement controller,
// still running, releases gated pods and lets it go), then kubectl delete
// -k of the overlay (the components stop, the namespace and CRDs go); then
// it installs the CRDs again, as the bed started with them.
func uninstall(t *testing.T, overlay string) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	for _, args := range [][]string{
		{"delete", "clusterpodplacementconfig", "cluster", "--ignore-not-found", "--timeout=180s"},
		{"delete", "-k", overlay, "--ignore-not-found", "--wait", "--timeout=180s"},
		{"apply", "--server-side", "-k", filepath.Join(bed.RepoRoot(), "manifests", "crd")},
		{"wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"},
	} {
		if _, err := framework.BedKubectl(ctx, testBed, args...); err != nil {
			t.Errorf("uninstalling: %v", err)
			return
		}
	}
}
