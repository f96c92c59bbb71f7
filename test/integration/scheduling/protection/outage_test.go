package protection

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
	"github.com/archway-build/archway/pkg/scheduling/protection"
	"github.com/archway-build/archway/test/bed"
)

// TestWebhookOutage takes every replica of the webhook away (the
// configuration's webhooks point at a port nothing listens on, as a Service
// without endpoints answers) and shows what an outage refuses: in mode
// Inform nothing, so a DaemonSet's pod and a kube-system pod tolerating the
// control plane are created; in mode Enable only pods outside the system
// namespaces that could reach a protected node, the DaemonSet's pod among
// them (the documented cost of Enable), while kube-system's pod and a pod
// with no node selection are still created. The pods webhook's
// failurePolicy follows the mode (Ignore, then Fail, then Ignore again when
// the config goes), with an event on the ControlPlaneProtection.
func TestWebhookOutage(t *testing.T) {
	h := newHarness(t, "outage")
	admin := as(t, "alice")

	// Inform: the webhook's replicas set failurePolicy Ignore, then go down.
	useConfig(t, schedulingv1alpha1.ModeInform)
	waitFailurePolicy(t, admissionregistrationv1.Ignore)
	up := takeWebhookDown(t)
	h.waitOutageSeen(admin)
	h.create(admin, daemonSetPod(h.ns, "ds-inform", "node-amd64-1"))
	h.create(admin, kubeSystemPod(h.t, "inform"))

	// Enable: set while up (in an outage nothing would change the policy).
	up()
	useConfig(t, schedulingv1alpha1.ModeEnable)
	waitFailurePolicy(t, admissionregistrationv1.Fail)
	note := waitConfigEvent(t, protection.EventFailurePolicySet, "fails closed")
	t.Logf("event on the ControlPlaneProtection: %s", note)
	up = takeWebhookDown(t)
	h.waitOutageSeen(admin)
	h.create(admin, kubeSystemPod(h.t, "enable"))
	h.create(admin, makePod(h.ns, "plain").obj())
	err := admin.Create(h.ctx, daemonSetPod(h.ns, "ds-enable", "node-amd64-1"))
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("DaemonSet pod in Enable while the webhook is down: %v, want refused for want of the webhook", err)
	}
	t.Logf("what a client sees in Enable while the webhook is down: %v", err)

	// No config: fail open again.
	up()
	cfg := &schedulingv1alpha1.ControlPlaneProtection{ObjectMeta: metav1.ObjectMeta{Name: schedulingv1alpha1.ControlPlaneProtectionName}}
	if err := k8s.Delete(h.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	waitFailurePolicy(t, admissionregistrationv1.Ignore)
}

// daemonSetPod is a pod as the DaemonSet controller makes it: pinned to
// its node by required node affinity on metadata.name, tolerating the
// node-condition taints.
func daemonSetPod(ns, name, node string) *corev1.Pod {
	pod := makePod(ns, name).obj()
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
	for _, key := range []string{"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
	}
	return pod
}

// kubeSystemPod is a pod of a system component in kube-system for the
// control-plane nodes (nodeSelector and toleration), removed at cleanup.
func kubeSystemPod(t *testing.T, name string) *corev1.Pod {
	pod := makePod(metav1.NamespaceSystem, "outage-"+name).onControlPlane().tolerateControlPlane().obj()
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), pod.DeepCopy(), client.GracePeriodSeconds(0)) })
	return pod
}

// takeWebhookDown points both webhooks of the configuration at a port
// nothing listens on, as when no replica is up; the returned function (also
// run at cleanup) points them back and waits until the webhook answers.
func takeWebhookDown(t *testing.T) (up func()) {
	t.Helper()
	port, err := bed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	var urls map[string]string
	setURLs(t, func(name, url string) string {
		if urls == nil {
			urls = map[string]string{}
		}
		urls[name] = url
		return strings.Replace(url, strings.TrimPrefix(webhooks.URL, "https://"), fmt.Sprintf("127.0.0.1:%d", port), 1)
	})
	done := false
	up = func() {
		if done {
			return
		}
		done = true
		setURLs(t, func(name, _ string) string { return urls[name] })
		if err := bed.WaitServing(context.Background(), webhooks.URL, webhooks.CA); err != nil {
			t.Fatal(err)
		}
		// The apiserver calls the webhook again: a request only it would
		// deny (Enable) or warn about (Inform) says so.
		waitWebhookAnswers(t)
	}
	t.Cleanup(up)
	return up
}

// setURLs rewrites the URL of each webhook of the configuration.
func setURLs(t *testing.T, rewrite func(name, url string) string) {
	t.Helper()
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, bed.Interval, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: protection.WebhookConfigurationName}, vwc); err != nil {
			return false, err
		}
		for i := range vwc.Webhooks {
			wh := &vwc.Webhooks[i]
			wh.ClientConfig.URL = ptr.To(rewrite(wh.Name, ptr.Deref(wh.ClientConfig.URL, "")))
		}
		// A conflict is the failure-policy controller writing first.
		return k8s.Update(ctx, vwc) == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitOutageSeen waits until the apiserver calls the dead address: a dry
// run of a pod the webhook is sent is refused for want of the webhook
// (failurePolicy Fail) or let through by the apiserver's fail-open path,
// which its apiserver_admission_webhook_fail_open_count counts (Ignore).
func (h *harness) waitOutageSeen(a *actor) {
	h.t.Helper()
	probe := makePod(h.ns, "probe").tolerateControlPlane().obj()
	err := wait.PollUntilContextTimeout(h.ctx, bed.Interval, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
		before, err := testBed.AdmissionFailOpen(ctx, protection.PodsWebhookName)
		if err != nil {
			return false, err
		}
		err = a.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err != nil {
			return strings.Contains(err.Error(), "failed calling webhook"), nil
		}
		after, err := testBed.AdmissionFailOpen(ctx, protection.PodsWebhookName)
		return after > before, err
	})
	if err != nil {
		h.t.Fatalf("the apiserver never failed to call the webhook taken down: %v", err)
	}
}

// waitWebhookAnswers waits until a pod tolerating the control plane in a
// namespace nobody authorized is denied (Enable) or warned about (Inform)
// on a dry run: the apiserver calls the webhook.
func waitWebhookAnswers(t *testing.T) {
	t.Helper()
	a := as(t, "outage-probe")
	probe := makePod(metav1.NamespaceDefault, "probe").tolerateControlPlane().obj()
	err := wait.PollUntilContextTimeout(context.Background(), bed.Interval, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
		a.takeWarnings()
		err := a.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return (err != nil && strings.Contains(err.Error(), "denied the request")) || (err == nil && len(a.takeWarnings()) > 0), nil
	})
	if err != nil {
		t.Fatalf("the webhook does not answer again: %v", err)
	}
}

// waitFailurePolicy waits until the pods webhook has failurePolicy p.
func waitFailurePolicy(t *testing.T, p admissionregistrationv1.FailurePolicyType) {
	t.Helper()
	var got admissionregistrationv1.FailurePolicyType
	err := wait.PollUntilContextTimeout(context.Background(), bed.Interval, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: protection.WebhookConfigurationName}, vwc); err != nil {
			return false, err
		}
		for _, wh := range vwc.Webhooks {
			if wh.Name == protection.PodsWebhookName {
				got = ptr.Deref(wh.FailurePolicy, "")
			}
		}
		return got == p, nil
	})
	if err != nil {
		t.Fatalf("the pods webhook's failurePolicy is %q, want %q: %v", got, p, err)
	}
}

// waitConfigEvent waits for an event with reason about the
// ControlPlaneProtection whose note holds want, and returns the note.
func waitConfigEvent(t *testing.T, reason, want string) string {
	t.Helper()
	var note string
	err := wait.PollUntilContextTimeout(context.Background(), bed.Interval, bed.DefaultTimeout, true, func(ctx context.Context) (bool, error) {
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "ControlPlaneProtection" && e.Reason == reason && strings.Contains(e.Note, want) {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event holding %q on the ControlPlaneProtection: %v", reason, want, err)
	}
	return note
}
