package placement

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
)

// TestBuildControllerBinary runs the placement components the way they are
// deployed: build-controller --controllers=placement-webhook,pod-placement
// with a --config placement section. Its webhook answers an admission over
// TLS; its controller (standing in for the suite's) places a pod; its
// metrics endpoint serves the placement metrics.
func TestBuildControllerBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds build-controller")
	}
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "binary", nil)
	dir := t.TempDir()
	bin, err := bed.GoBuild(h.ctx, dir, "./cmd/build-controller")
	if err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(dir, "certs")
	if err := os.Mkdir(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	ca, err := bed.WriteServingCert(certs)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: config.archway.dev/v1alpha1
kind: BuildControllerConfiguration
build:
  builderImage: registry.example.com/archway/builder:test
placement:
  insecureRegistries: [%q, %q]
  inspection: {tries: 2, backoff: 100ms}
`, testBed.Registry.Host, testBed.AuthRegistry.Host)), 0o600); err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = bed.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	webhookPort, metricsPort, probePort := ports[0], ports[1], ports[2]

	// The binary's controller stands in for the suite's.
	suiteController.stop()
	t.Cleanup(func() {
		var err error
		if suiteController, err = startController(suiteOptions()); err != nil {
			t.Errorf("restarting the suite controller: %v", err)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin,
		"--kubeconfig="+testBed.Kubeconfig,
		"--config="+config,
		"--controllers=placement-webhook,pod-placement",
		"--leader-elect=false",
		fmt.Sprintf("--webhook-port=%d", webhookPort),
		"--webhook-cert-dir="+certs,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		// Plain HTTP: the suite scrapes without a token.
		"--metrics-secure=false",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
	)
	// Its heartbeat lease where the suite's webhook looks for it.
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+suiteOptions().Namespace)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("build-controller's log:\n%s", logs.String())
		}
	})
	// Ready once its informers have synced.
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	if err := wait.PollUntilContextTimeout(h.ctx, 100*time.Millisecond, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
		resp, err := http.Get(readyz)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("build-controller never became ready: %v", err)
	}

	// Its webhook gates a pod, over TLS.
	raw, err := json.Marshal(makePod(h.ns, "admitted").image(imgAll).obj())
	if err != nil {
		t.Fatal(err)
	}
	review, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "binary", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: h.ns, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}, DryRun: ptr.To(true),
		},
	})
	// It gates once it has seen its own controller's heartbeat.
	var answer admissionv1.AdmissionReview
	err = wait.PollUntilContextTimeout(h.ctx, bed.Interval, bed.DefaultTimeout, true, func(context.Context) (bool, error) {
		resp, err := tlsClient(ca, 1).Post(fmt.Sprintf("https://127.0.0.1:%d%s", webhookPort, placement.WebhookPath), "application/json", bytes.NewReader(review))
		if err != nil {
			return false, err
		}
		answer = admissionv1.AdmissionReview{}
		err = json.NewDecoder(resp.Body).Decode(&answer)
		_ = resp.Body.Close()
		// The gate itself, not merely the label (scheduling-gate: not-set
		// is written on pods admitted ungated).
		return err == nil && answer.Response != nil && strings.Contains(string(answer.Response.Patch), `"/spec/schedulingGates"`), err
	})
	if err != nil {
		t.Errorf("the binary's webhook did not gate the pod: %v %+v", err, answer.Response)
	}

	// Its controller places a pod the suite's webhook gated, once the
	// webhook has seen its heartbeat.
	if err := waitHeartbeatSeen(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.create(makePod(h.ns, "placed").image(imgARM64S390X).obj())
	h.expectLabels(h.waitReleased("placed"), map[string]string{placement.MultiArchLabel: "", placement.ArchLabelFor("arm64"): "", placement.ArchLabelFor("s390x"): ""})
	if arch := h.waitBound("placed"); arch != "arm64" && arch != "s390x" {
		t.Errorf("bound to %s, want arm64 or s390x", arch)
	}

	// Its metrics endpoint serves the placement metrics.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{
		`archway_placement_pods_total{outcome="placed"} 1`,
		`archway_placement_webhook_pods_total{reason="",result="gated"} 1`,
		"archway_placement_registry_requests_total",
		"archway_placement_image_cache_lookups_total",
		"archway_placement_gated_duration_seconds_bucket",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}
