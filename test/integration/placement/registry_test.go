package placement

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
)

// closedPortRegistry is a registry host where nothing listens.
func closedPortRegistry(t *testing.T) string {
	t.Helper()
	port, err := bed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// counter reads a counter of the suite controller's registry (summed over
// the series matching labels).
func counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v, err := gatherCounter(name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func gatherCounter(name string, labels map[string]string) (float64, error) {
	families, err := suiteController.registry.Gather()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matchLabels(m, labels) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum, nil
}

func matchLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestRegistryDownFallsBack: when the registry cannot be reached the pod is
// retried with growing delays, then placed on the fallback architecture,
// labelled single-arch with that architecture's label.
func TestRegistryDownFallsBack(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{FallbackArchitecture: "ppc64le"})
	h := newHarness(t, "down", nil)
	retries := counter(t, "archway_placement_inspection_retries_total", nil)
	image := closedPortRegistry(t) + "/placement/gone:1"
	start := time.Now()
	h.create(makePod(h.ns, "fallback").image(image).obj())
	pod := h.waitReleased("fallback")
	elapsed := time.Since(start)
	h.expectLabels(pod, map[string]string{
		placement.FallbackArchLabel: "ppc64le", placement.ImageInspectionErrorLabel: "", placement.NodeAffinityLabel: "set",
		// Labelled by architecture as any pod required onto one is.
		placement.SingleArchLabel: "", placement.ArchLabelFor("ppc64le"): "",
	})
	h.expectNoLabels(pod, placement.MultiArchLabel, placement.ArchLabelFor("amd64"), placement.NoSupportedArchLabel)
	if got := counter(t, "archway_placement_inspection_retries_total", nil) - retries; got != 2 {
		t.Errorf("%v retries, want 2 (3 tries)", got)
	}
	// Delays of 100 ms and 200 ms separate the three tries.
	if elapsed < 300*time.Millisecond {
		t.Errorf("released after %v: the retries were not spaced out", elapsed)
	}
	note := h.waitEvent("fallback", placement.EventFallbackPredicateSet)
	if !strings.Contains(note, "connection refused") || !strings.Contains(note, "ppc64le") {
		t.Errorf("event note %q does not carry the registry's error and the fallback", note)
	}
	if arch := h.waitBound("fallback"); arch != "ppc64le" {
		t.Errorf("bound to %s, want the fallback ppc64le", arch)
	}
}

// TestRegistryDownWithoutFallback: without a fallback the pod is released
// unchanged, labelled, with the registry's error in an event.
func TestRegistryDownWithoutFallback(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "down-nofb", nil)
	h.create(makePod(h.ns, "unchanged").image(closedPortRegistry(t) + "/placement/gone:1").obj())
	pod := h.waitReleased("unchanged")
	h.expectLabels(pod, map[string]string{placement.ImageInspectionErrorLabel: "", placement.NodeAffinityLabel: "not-set"})
	if pod.Spec.Affinity != nil {
		t.Errorf("affinity changed: %+v", pod.Spec.Affinity)
	}
	note := h.waitEvent("unchanged", placement.EventInspectionError)
	if !strings.Contains(note, "connection refused") {
		t.Errorf("event note %q does not carry the registry's error", note)
	}
	h.waitBound("unchanged")
	if got := h.events("unchanged"); strings.Join(got, ",") != placement.EventInspectionError+","+placement.EventSchedGateAdded {
		t.Errorf("events %v, want one gate-added and one inspection error", got)
	}
}

// dockerConfigSecret is a kubernetes.io/dockerconfigjson secret for host.
func dockerConfigSecret(ns, name, host, user, password string) *corev1.Secret {
	data, _ := json.Marshal(map[string]any{"auths": map[string]any{
		host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))},
	}})
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: data},
	}
}

// dockercfgSecret is dockerConfigSecret in the legacy kubernetes.io/dockercfg
// form: the auths map alone, under .dockercfg.
func dockercfgSecret(ns, name, host, user, password string) *corev1.Secret {
	data, _ := json.Marshal(map[string]any{
		host: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))},
	})
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeDockercfg,
		Data:       map[string][]byte{corev1.DockerConfigKey: data},
	}
}

// TestPrivateRegistryCredentials: an image only in the htpasswd registry is
// inspected with the pod's pull secret, its service account's, or the
// global pull secret, as a kubelet would pull it; a wrong secret is an
// inspection error.
func TestPrivateRegistryCredentials(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "private", nil)
	reg := testBed.AuthRegistry
	for _, s := range []*corev1.Secret{
		dockerConfigSecret(h.ns, "pull", reg.Host, reg.Username, reg.Password),
		dockerConfigSecret(h.ns, "wrong", reg.Host, reg.Username, "not-the-password"),
	} {
		if err := k8s.Create(h.ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	sa := &corev1.ServiceAccount{
		ObjectMeta:       metav1.ObjectMeta{Namespace: h.ns, Name: "puller"},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
	}
	if err := k8s.Create(h.ctx, sa); err != nil {
		t.Fatal(err)
	}

	t.Run("pod pull secret", func(t *testing.T) {
		h := &harness{t: t, ctx: h.ctx, ns: h.ns}
		h.create(makePod(h.ns, "pod-secret").image(imgPrivate).pullSecret("pull").obj())
		h.expectLabels(h.waitReleased("pod-secret"), map[string]string{placement.SingleArchLabel: "", placement.ArchLabelFor("arm64"): ""})
		if arch := h.waitBound("pod-secret"); arch != "arm64" {
			t.Errorf("bound to %s, want arm64", arch)
		}
	})
	t.Run("legacy dockercfg pull secret", func(t *testing.T) {
		h := &harness{t: t, ctx: h.ctx, ns: h.ns}
		legacy := dockercfgSecret(h.ns, "legacy", reg.Host, reg.Username, reg.Password)
		if err := k8s.Create(h.ctx, legacy); err != nil {
			t.Fatal(err)
		}
		h.create(makePod(h.ns, "legacy-secret").image(imgPrivate).pullSecret("legacy").obj())
		h.expectLabels(h.waitReleased("legacy-secret"), map[string]string{placement.SingleArchLabel: "", placement.ArchLabelFor("arm64"): ""})
	})
	t.Run("service account pull secret", func(t *testing.T) {
		h := &harness{t: t, ctx: h.ctx, ns: h.ns}
		h.create(makePod(h.ns, "sa-secret").image(imgPrivate).serviceAccount("puller").obj())
		h.expectLabels(h.waitReleased("sa-secret"), map[string]string{placement.SingleArchLabel: "", placement.ArchLabelFor("arm64"): ""})
		if arch := h.waitBound("sa-secret"); arch != "arm64" {
			t.Errorf("bound to %s, want arm64", arch)
		}
	})
	t.Run("global pull secret", func(t *testing.T) {
		h := &harness{t: t, ctx: h.ctx, ns: h.ns}
		_ = k8s.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: globalPullSecret.Namespace}})
		global := dockerConfigSecret(globalPullSecret.Namespace, globalPullSecret.Name, reg.Host, reg.Username, reg.Password)
		if err := k8s.Create(h.ctx, global); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(h.ctx, global) })
		// A wrong pod secret first, the global one after: the kubelet tries
		// both, and so does the inspection.
		h.create(makePod(h.ns, "global-secret").image(imgPrivate).pullSecret("wrong").obj())
		h.expectLabels(h.waitReleased("global-secret"), map[string]string{placement.SingleArchLabel: "", placement.ArchLabelFor("arm64"): ""})
		if arch := h.waitBound("global-secret"); arch != "arm64" {
			t.Errorf("bound to %s, want arm64", arch)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		h := &harness{t: t, ctx: h.ctx, ns: h.ns}
		h.create(makePod(h.ns, "wrong-secret").image(imgPrivate).pullSecret("wrong").obj())
		pod := h.waitReleased("wrong-secret")
		h.expectLabels(pod, map[string]string{placement.ImageInspectionErrorLabel: "", placement.NodeAffinityLabel: "not-set"})
		note := h.waitEvent("wrong-secret", placement.EventInspectionError)
		if !strings.Contains(strings.ToLower(note), "unauthorized") && !strings.Contains(strings.ToLower(note), "authentication required") {
			t.Errorf("event note %q does not say the registry refused the credentials", note)
		}
	})
	t.Run("no secret", func(t *testing.T) {
		h := &harness{t: t, ctx: h.ctx, ns: h.ns}
		h.create(makePod(h.ns, "anonymous").image(imgPrivate).obj())
		h.expectLabels(h.waitReleased("anonymous"), map[string]string{placement.ImageInspectionErrorLabel: ""})
	})
}

// blackholeRegistry accepts connections and never answers, so inspections
// hang until their timeout: pods stay gated meanwhile.
func blackholeRegistry(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}
