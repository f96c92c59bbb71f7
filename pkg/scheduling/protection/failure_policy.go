package protection

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

// PodsWebhookName is the pods webhook of the WebhookConfigurationName
// configuration: its failurePolicy follows the groups' modes.
const PodsWebhookName = "pods.control-plane-protection.scheduling.archway.dev"

// FailurePolicy is the failurePolicy the pods webhook should have for cfg
// (nil when no ControlPlaneProtection exists; pass it through Effective
// for the override): Fail while some group is in mode Enable, Ignore
// otherwise. Only a group that denies needs the
// apiserver to refuse what the webhook cannot judge; in Inform and Disable
// an outage of the webhook must not refuse anything, since the webhook
// would have admitted it.
func FailurePolicy(cfg *schedulingv1alpha1.ControlPlaneProtection) admissionregistrationv1.FailurePolicyType {
	if cfg != nil {
		for _, g := range cfg.Spec.Groups {
			if g.Mode == schedulingv1alpha1.ModeEnable {
				return admissionregistrationv1.Fail
			}
		}
	}
	return admissionregistrationv1.Ignore
}

// setFailurePolicy sets the failurePolicy of the webhook named
// PodsWebhookName in vwc to p, in place; it reports whether the webhook was
// found and whether anything changed.
func setFailurePolicy(vwc *admissionregistrationv1.ValidatingWebhookConfiguration, p admissionregistrationv1.FailurePolicyType) (found, changed bool) {
	for i := range vwc.Webhooks {
		wh := &vwc.Webhooks[i]
		if wh.Name != PodsWebhookName {
			continue
		}
		if wh.FailurePolicy != nil && *wh.FailurePolicy == p {
			return true, false
		}
		wh.FailurePolicy = &p
		return true, true
	}
	return false, false
}

// failurePolicyNote is what the event on the ControlPlaneProtection says
// about the policy just set.
func failurePolicyNote(p admissionregistrationv1.FailurePolicyType) string {
	if p == admissionregistrationv1.Fail {
		return fmt.Sprintf("A group is in mode Enable: webhook %s of %s now fails closed (failurePolicy Fail). While no replica of the webhook answers, "+
			"pods outside the excluded system namespaces that name a node, select nodes or tolerate a control-plane taint are refused; "+
			"setting every group to Inform or Disable, or an override (spec.override), makes it fail open again", PodsWebhookName, WebhookConfigurationName)
	}
	return fmt.Sprintf("No group is in mode Enable: webhook %s of %s fails open (failurePolicy Ignore); an outage of the webhook refuses no pod",
		PodsWebhookName, WebhookConfigurationName)
}

// failurePolicyReconciler keeps the pods webhook's failurePolicy in step
// with the ControlPlaneProtection's modes. It runs on every replica of the
// webhook: each computes the same policy from the same objects, so two
// writers agree and a conflict only means another got there first.
type failurePolicyReconciler struct {
	client   client.Client
	recorder events.EventRecorder
}

// setupFailurePolicy adds the reconciler to mgr: it follows the singleton
// ControlPlaneProtection and the webhook configuration (so a configuration
// re-applied with another policy is set right again).
func setupFailurePolicy(mgr ctrl.Manager, recorder events.EventRecorder) error {
	singleton := func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: schedulingv1alpha1.ControlPlaneProtectionName}}}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("control-plane-protection-failure-policy").
		For(&schedulingv1alpha1.ControlPlaneProtection{}).
		Watches(&admissionregistrationv1.ValidatingWebhookConfiguration{}, handler.EnqueueRequestsFromMapFunc(singleton),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == WebhookConfigurationName }))).
		// Every replica keeps the policy: a leader would be one more thing
		// that must be up for an emergency change of mode to take effect.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(&failurePolicyReconciler{client: mgr.GetClient(), recorder: recorder})
}

func (r *failurePolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cfg *schedulingv1alpha1.ControlPlaneProtection
	if req.Name == schedulingv1alpha1.ControlPlaneProtectionName {
		cfg = &schedulingv1alpha1.ControlPlaneProtection{}
		if err := r.client.Get(ctx, req.NamespacedName, cfg); err != nil {
			if !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
			cfg = nil
		}
	}
	if cfg != nil && cfg.DeletionTimestamp != nil {
		cfg = nil
	}
	// An override in effect relaxes the modes until it lapses: look again
	// then.
	now := time.Now()
	want := FailurePolicy(Effective(cfg, now))
	var res ctrl.Result
	if next := nextChange(cfg, now); !next.IsZero() {
		res.RequeueAfter = next.Sub(now) + time.Millisecond
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: WebhookConfigurationName}, vwc); err != nil {
		// Not installed (yet): its creation is watched.
		return res, client.IgnoreNotFound(err)
	}
	found, changed := setFailurePolicy(vwc, want)
	if !found {
		log.FromContext(ctx).Info("the webhook configuration has no pods webhook; nothing to keep", "webhookConfiguration", WebhookConfigurationName, "webhook", PodsWebhookName)
		return res, nil
	}
	if !changed {
		return res, nil
	}
	if err := r.client.Update(ctx, vwc); err != nil {
		if apierrors.IsConflict(err) {
			// Another replica or the certificate injection wrote first:
			// the newer version arrives through the watch.
			return res, nil
		}
		return ctrl.Result{}, fmt.Errorf("setting failurePolicy %s on %s: %w", want, WebhookConfigurationName, err)
	}
	note := failurePolicyNote(want)
	log.FromContext(ctx).Info("set the pods webhook's failurePolicy", "failurePolicy", want, "webhookConfiguration", WebhookConfigurationName)
	if cfg != nil {
		r.recorder.Eventf(cfg, nil, corev1.EventTypeNormal, EventFailurePolicySet, "SetFailurePolicy", "%s", note)
	}
	return res, nil
}
