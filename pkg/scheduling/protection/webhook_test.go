package protection

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

// The response carries what the bed cannot observe without an audit log:
// the audit annotations, next to the denial or the warning. (The bed tests
// check denials, warnings and events through the real apiserver.)
func TestHandleAuditAnnotations(t *testing.T) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "control-plane-1", Labels: map[string]string{cpLabel: ""}}}
	for _, tc := range []struct {
		mode         schedulingv1alpha1.GroupMode
		wantAllowed  bool
		wantDecision string
	}{
		{schedulingv1alpha1.ModeEnable, false, "denied"},
		{schedulingv1alpha1.ModeInform, true, "warned"},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(config(tc.mode), node).Build()
			m, err := newMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			w := &webhook{decoder: admission.NewDecoder(scheme), cache: reader, recorder: &events.FakeRecorder{}, metrics: m, log: logr.Discard()}
			pod := makePod("team", "p").nodeName("control-plane-1").obj()
			raw, _ := json.Marshal(pod)
			resp := w.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Namespace: "team", Name: "p",
				UserInfo: authenticationv1.UserInfo{Username: "alice"},
				Object:   runtime.RawExtension{Raw: raw},
			}})
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed %v, want %v (%+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if got := resp.AuditAnnotations["controlplane-decision"]; got != tc.wantDecision {
				t.Errorf("audit decision %q, want %q", got, tc.wantDecision)
			}
			if !strings.Contains(resp.AuditAnnotations["controlplane-reason"], `spec.nodeName "control-plane-1"`) {
				t.Errorf("audit reason %q", resp.AuditAnnotations["controlplane-reason"])
			}
			if tc.wantAllowed && len(resp.Warnings) != 1 {
				t.Errorf("warnings %q, want one", resp.Warnings)
			}
		})
	}
}
