package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

// TestBuiltImagePlacedFromBuildStatus: a four-platform Build completes, and
// pods running its output (by tag, as a Deployment's would, and by digest)
// get the four-architecture required affinity from the Build's status. The
// registry's access log shows what placement asked it for that repository:
// a manifest HEAD to resolve the tag at most, never a manifest or config
// GET. The placement controller runs as its own build-controller process
// (--controllers=pod-placement); the pods are created gated and labelled as
// the placement webhook admits them.
func TestBuiltImagePlacedFromBuildStatus(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "built")
	h.buildConfig(machineDockerfile(env.Bed.BaseImage), framework.Platforms, nil)
	h.startBuild()
	b := h.waitTerminal()
	g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s", b.Status.Message)
	g.Expect(b.Status.Output.To).NotTo(BeNil())
	d := b.Status.Output.To.ImageDigest

	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName}}
	if err := env.Bed.Client.Create(h.ctx, cfg); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	startPlacementController(t, h.ctx)
	// Deleted while the controller runs (cleanups run last first): it
	// holds the config with a finalizer until its gated pods are released.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), bed.LongTimeout)
		defer cancel()
		_ = env.Bed.Client.Delete(ctx, cfg)
		for ctx.Err() == nil {
			if err := env.Bed.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg); apierrors.IsNotFound(err) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("the ClusterPodPlacementConfig was not deleted: %+v", cfg.Finalizers)
	})

	before, err := env.Bed.Registry.Requests()
	g.Expect(err).NotTo(HaveOccurred())
	images := map[string]string{
		"web-0": h.output(), "web-1": h.output(), "web-2": h.output(),
		"pinned": env.Bed.Registry.Host + "/" + h.repo + "@" + d,
	}
	for name, img := range images {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name, Labels: map[string]string{
				"app": "web", placement.SchedulingGateLabel: placement.SchedulingGateLabelGated,
			}},
			Spec: corev1.PodSpec{
				Containers:      []corev1.Container{{Name: "web", Image: img}},
				SchedulingGates: []corev1.PodSchedulingGate{{Name: placement.SchedulingGate}},
			},
		}
		g.Expect(env.Bed.Client.Create(h.ctx, pod)).To(Succeed())
	}
	for name := range images {
		var pod corev1.Pod
		g.Eventually(func() bool {
			if err := env.Bed.Client.Get(h.ctx, types.NamespacedName{Namespace: h.ns, Name: name}, &pod); err != nil {
				return false
			}
			return pod.Labels[placement.SchedulingGateLabel] == placement.SchedulingGateLabelRemoved
		}).WithContext(h.ctx).WithTimeout(bed.CaseTimeout).Should(BeTrue(), "pod %s released", name)
		g.Expect(sets.List(requiredArchs(&pod))).To(Equal([]string{"amd64", "arm64", "ppc64le", "s390x"}), "pod %s", name)
	}

	after, err := env.Bed.Registry.Requests()
	g.Expect(err).NotTo(HaveOccurred())
	counts := map[string]int{}
	prefix := "/v2/" + h.repo + "/"
	for _, r := range after[len(before):] {
		if !strings.HasPrefix(r.Path, prefix) || !strings.Contains(r.UserAgent, "archway-placement") {
			continue
		}
		kind := "blob"
		if strings.Contains(r.Path, "/manifests/") {
			kind = "manifest"
		}
		counts[r.Method+" "+kind]++
	}
	t.Logf("registry requests from placement for %s while placing %d pods of the built image: %d manifest HEAD, %d manifest GET, %d blob GET (all %v)",
		h.repo, len(images), counts["HEAD manifest"], counts["GET manifest"], counts["GET blob"], counts)
	g.Expect(counts["GET manifest"]).To(BeZero(), "manifests read from the registry")
	g.Expect(counts["GET blob"]).To(BeZero(), "configs read from the registry")
	g.Expect(counts["HEAD manifest"]).To(BeNumerically("<=", 1), "the tag resolved more than once")
}

// startPlacementController runs build-controller with
// --controllers=pod-placement as a process of its own until the test ends.
func startPlacementController(t *testing.T, ctx context.Context) {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: config.archway.dev/v1alpha1\nkind: BuildControllerConfiguration\nbuild:\n  builderImage: "+framework.BuilderImage+"\n"+
		// Placement verifies loopback registries as nodes do: the bed's
		// plain-HTTP registry is listed.
		"placement:\n  insecureRegistries: ["+strconv.Quote(env.Bed.Registry.Host)+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	probe, err := bed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := bed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "placement.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(env.Binaries.Controller,
		"--kubeconfig="+env.Bed.Kubeconfig, "--config="+config, "--controllers=pod-placement", "--leader-elect=false",
		fmt.Sprintf("--webhook-port=%d", hooks), "--webhook-cert-dir="+dir,
		"--metrics-bind-address=0", fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probe))
	cmd.Env = append(os.Environ(), "POD_NAMESPACE=archway-system")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			t.Logf("placement controller's log ends:\n%s", tail(logPath, 30))
		}
	})
	// Ready, and its registry configuration applied: applying it forgets
	// every cached answer, so a tag resolved before would be resolved
	// again (a second HEAD the registry count would show).
	deadline := time.Now().Add(bed.CaseTimeout)
	for {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probe)); err == nil {
			_ = resp.Body.Close()
			if log, _ := os.ReadFile(logPath); resp.StatusCode == http.StatusOK && strings.Contains(string(log), "applied the registry configuration") {
				return
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("the placement controller was not ready; its log ends:\n%s", tail(logPath, 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// requiredArchs are the architectures the pod's required node affinity
// allows (its terms' kubernetes.io/arch In values).
func requiredArchs(pod *corev1.Pod) sets.Set[string] {
	out := sets.New[string]()
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil || pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return out
	}
	for _, term := range pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelArchStable && e.Operator == corev1.NodeSelectorOpIn {
				out.Insert(e.Values...)
			}
		}
	}
	return out
}
