package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
)

// stubCache answers Get for the config and namespaces from memory, as an
// informer cache would.
type stubCache struct {
	client.Reader
	config     *multiarchv1beta1.ClusterPodPlacementConfig
	namespaces map[string]*corev1.Namespace
	// noController leaves out the heartbeat lease.
	noController bool
}

// List finds no PodPlacementConfig.
func (s *stubCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func (s *stubCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch o := obj.(type) {
	case *multiarchv1beta1.ClusterPodPlacementConfig:
		if s.config == nil {
			return apierrors.NewNotFound(multiarchv1beta1.GroupVersion.WithResource("clusterpodplacementconfigs").GroupResource(), key.Name)
		}
		s.config.DeepCopyInto(o)
		return nil
	case *coordinationv1.Lease:
		if s.noController {
			return apierrors.NewNotFound(coordinationv1.Resource("leases"), key.Name)
		}
		now := metav1.NewMicroTime(time.Now())
		o.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To("controller"), RenewTime: &now, LeaseDurationSeconds: ptr.To[int32](20)}
		return nil
	case *corev1.Namespace:
		ns, ok := s.namespaces[key.Name]
		if !ok {
			return apierrors.NewNotFound(corev1.Resource("namespaces"), key.Name)
		}
		ns.DeepCopyInto(o)
		return nil
	}
	return fmt.Errorf("unexpected %T", obj)
}

func newTestWebhook(t testing.TB, cache *stubCache) (admission.Handler, *fakeRecorder) {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(multiarchv1beta1.AddToScheme(scheme))
	metrics, err := newWebhookMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	rec := &fakeRecorder{}
	wh := &gateWebhook{
		decoder: admission.NewDecoder(scheme), cache: cache, leases: cache, now: time.Now, ownNamespace: "archway-system",
		events: newGateEvents(rec, time.Minute), metrics: metrics, log: logr.Discard(),
	}
	return wh, rec
}

func podRequest(t testing.TB, ns string, pod *corev1.Pod) admission.Request {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Create, Namespace: ns,
		Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Object: runtime.RawExtension{Raw: raw},
	}}
}

func samplePod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}},
		},
	}
}

func TestWebhookHandler(t *testing.T) {
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	h, rec := newTestWebhook(t, &stubCache{config: cfg})
	resp := h.Handle(context.Background(), podRequest(t, "app", samplePod()))
	if !resp.Allowed {
		t.Fatalf("denied: %+v", resp.Result)
	}
	var ops []string
	for _, p := range resp.Patches {
		ops = append(ops, p.Operation+" "+p.Path)
	}
	got := strings.Join(ops, ", ")
	for _, want := range []string{"/spec/schedulingGates", "/metadata/labels/multiarch.openshift.io~1scheduling-gate", "/metadata/labels/multiarch.openshift.io~1node-affinity"} {
		if !strings.Contains(got, want) {
			t.Errorf("patch %q has no %s", got, want)
		}
	}
	for _, p := range resp.Patches {
		if p.Operation == "remove" {
			t.Errorf("the patch removes what the webhook does not own: %s", p.Path)
		}
	}
	// The event waits for the persisted pod.
	if len(rec.events) != 0 {
		t.Errorf("an event at admission: %v", rec.events)
	}

	// No config: allowed, untouched.
	h, _ = newTestWebhook(t, &stubCache{})
	if resp := h.Handle(context.Background(), podRequest(t, "app", samplePod())); !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("without a config: allowed=%v patches=%v", resp.Allowed, resp.Patches)
	}
}

// BenchmarkWebhookHandler is the CPU cost of one admission: decode, decide,
// patch.
func BenchmarkWebhookHandler(b *testing.B) {
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	h, _ := newTestWebhook(b, &stubCache{config: cfg})
	req := podRequest(b, "app", samplePod())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if resp := h.Handle(ctx, req); !resp.Allowed {
			b.Fatal("denied")
		}
	}
}

// FuzzWebhookPodDecoding feeds the webhook arbitrary pod JSON: it must
// never deny a pod the decoder accepts, never panic, and its patch applied
// to the pod may only add the gate and the gated label.
func FuzzWebhookPodDecoding(f *testing.F) {
	seed, _ := json.Marshal(samplePod())
	f.Add(seed)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"spec":{"nodeSelector":{"kubernetes.io/arch":"arm64"}}}`))
	f.Add([]byte(`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"x","uid":"1"}]},"spec":{"containers":[]}}`))
	f.Add([]byte(`{"spec":{"schedulingGates":[{"name":"multiarch.openshift.io/scheduling-gate"}]}}`))
	f.Add([]byte(`{"metadata":{"labels":null},"spec":{"schedulingGates":null,"nodeName":""}}`))
	f.Add([]byte(`{"metadata":{"labels":{"multiarch.openshift.io/scheduling-gate":"removed"}},"spec":{"schedulingGates":[{"name":"other"}]}}`))
	f.Add([]byte(`not json`))
	f.Add([]byte("null "))
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	h, _ := newTestWebhook(f, &stubCache{config: cfg})
	f.Fuzz(func(t *testing.T, raw []byte) {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID: "1", Operation: admissionv1.Create, Namespace: "app",
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: raw},
		}}
		resp := h.Handle(context.Background(), req)
		// The apiserver reads JSON case-sensitively; so does this test.
		var before corev1.Pod
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &before); err != nil {
			// Not a pod (the apiserver never sends one): admitted as is.
			if !resp.Allowed || len(resp.Patches) > 0 {
				t.Fatalf("allowed=%v patches=%v for something that is not a pod", resp.Allowed, resp.Patches)
			}
			return
		}
		if !resp.Allowed {
			t.Fatalf("denied a pod: %+v", resp.Result)
		}
		if len(resp.Patches) == 0 {
			return
		}
		ops, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patch, err := jsonpatch.DecodePatch(ops)
		if err != nil {
			t.Fatal(err)
		}
		patched, err := patch.Apply(raw)
		if err != nil {
			t.Fatalf("the patch does not apply to the pod: %v\n%s", err, ops)
		}
		var after corev1.Pod
		if err := kjson.UnmarshalCaseSensitivePreserveInts(patched, &after); err != nil {
			t.Fatal(err)
		}
		if placement.HasGate(&after) != (after.Labels[placement.SchedulingGateLabel] == placement.SchedulingGateLabelGated) ||
			(!placement.HasGate(&after) && after.Labels[placement.SchedulingGateLabel] != placement.SchedulingGateLabelNotSet) {
			t.Fatalf("patched, but the gate and its label disagree: %s", patched)
		}
		// Take the gate and the labels off: what is left is the pod as sent.
		placement.RemoveGate(&after)
		before.Spec.SchedulingGates = slices.DeleteFunc(before.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == placement.SchedulingGate })
		for _, l := range []string{placement.SchedulingGateLabel, placement.NodeAffinityLabel, placement.PreferredNodeAffinityLabel} {
			delete(after.Labels, l)
			delete(before.Labels, l)
		}
		for _, p := range []*corev1.Pod{&before, &after} {
			if len(p.Labels) == 0 {
				p.Labels = nil
			}
			if len(p.Spec.SchedulingGates) == 0 {
				p.Spec.SchedulingGates = nil
			}
		}
		if !equality.Semantic.DeepEqual(before, after) {
			t.Fatalf("the patch changed more than the gate and the label:\n%s", ops)
		}
	})
}
