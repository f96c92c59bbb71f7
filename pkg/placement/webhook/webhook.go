package webhook

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
)

// gateWebhook adds the scheduling gate to new pods. It reads only
// informer caches (the config and namespaces) and never fails admission:
// whatever goes wrong, the pod is admitted ungated.
//
// Default is the typed defaulter that decides and gates; Handle serves it
// over admission, answering with a patch of exactly the gate and the label
// (gatePatch) rather than a diff of the re-encoded pod.
type gateWebhook struct {
	decoder      admission.Decoder
	cache        client.Reader
	leases       client.Reader // the heartbeat lease
	heartbeat    types.NamespacedName
	now          func() time.Time
	ownNamespace string
	events       *gateEvents
	metrics      *webhookMetrics
	log          logr.Logger
}

var (
	_ admission.Defaulter[*corev1.Pod] = (*gateWebhook)(nil)
	_ admission.Handler                = (*gateWebhook)(nil)
)

// Handle decodes the pod, lets Default decide, and patches the raw pod
// with the gate and the label when Default gated it. It never denies: a
// pod it cannot read is admitted as it is.
func (w *gateWebhook) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	pod := &corev1.Pod{}
	if err := w.decoder.Decode(req, pod); err != nil {
		w.log.Error(err, "decoding the pod; admitting it ungated", "namespace", req.Namespace)
		w.metrics.notIntercepted.WithLabelValues(failedDecode).Inc()
		return admission.Allowed("")
	}
	if placement.HasGate(pod) {
		// Gated by someone else: the controller handles it as it is, once
		// the gated label brings it into the controller's watch.
		if pod.Labels[placement.SchedulingGateLabel] == placement.SchedulingGateLabelGated {
			return admission.Allowed("")
		}
		patch, err := admissionPatch(req.Object.Raw, map[string]string{placement.SchedulingGateLabel: placement.SchedulingGateLabelGated}, false)
		if err != nil {
			w.log.Error(err, "labelling a pod gated by others; admitting it as it is", "namespace", req.Namespace)
			w.metrics.notIntercepted.WithLabelValues(failedPatch).Inc()
			return admission.Allowed("")
		}
		return admission.Patched("", patch...)
	}
	gated, labels := w.admit(admission.NewContextWithRequest(ctx, req), pod)
	if !gated && len(labels) == 0 {
		return admission.Allowed("")
	}
	patch, err := admissionPatch(req.Object.Raw, labels, gated)
	if err != nil {
		w.log.Error(err, "patching the pod; admitting it ungated", "namespace", req.Namespace)
		w.metrics.notIntercepted.WithLabelValues(failedPatch).Inc()
		return admission.Allowed("")
	}
	return admission.Patched("", patch...)
}

// Default gates the pod when shouldGate says so, and labels it.
func (w *gateWebhook) Default(ctx context.Context, pod *corev1.Pod) error {
	gated, labels := w.admit(ctx, pod)
	if gated {
		placement.AddGate(pod)
	}
	for k, v := range labels {
		placement.SetLabel(pod, k, v)
	}
	return nil
}

// admit decides whether the pod is gated and which labels it gets; it
// changes nothing.
func (w *gateWebhook) admit(ctx context.Context, pod *corev1.Pod) (bool, map[string]string) {
	start := time.Now()
	namespace, dryRun := pod.Namespace, false
	if req, err := admission.RequestFromContext(ctx); err == nil {
		if req.Namespace != "" {
			namespace = req.Namespace
		}
		dryRun = req.DryRun != nil && *req.DryRun
	}
	in := admissionInput{pod: pod, namespace: namespace, ownNamespace: w.ownNamespace}
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{}
	switch err := w.cache.Get(ctx, types.NamespacedName{Name: multiarchv1beta1.ClusterPodPlacementConfigName}, cfg); {
	case err == nil:
		in.config = cfg
	case !apierrors.IsNotFound(err):
		w.log.Error(err, "reading the ClusterPodPlacementConfig; admitting the pod ungated", "namespace", namespace)
		w.metrics.notIntercepted.WithLabelValues(failedConfig).Inc()
	}
	if in.config != nil && in.config.Spec.NamespaceSelector != nil {
		ns := &corev1.Namespace{}
		if err := w.cache.Get(ctx, types.NamespacedName{Name: namespace}, ns); err == nil {
			in.namespaceLabels = labels.Set(ns.Labels)
		}
	}
	if in.config != nil {
		local := &multiarchv1beta1.PodPlacementConfigList{}
		if err := w.cache.List(ctx, local, client.InNamespace(namespace)); err == nil {
			in.local = local.Items
		}
	}
	if in.config != nil {
		lease := &coordinationv1.Lease{}
		if err := w.leases.Get(ctx, w.heartbeat, lease); err == nil {
			in.controllerAlive = placement.ControllerAlive(lease, w.now())
		}
	}
	ok, reason := shouldGate(in)
	if ok {
		if !dryRun {
			w.events.expect(namespace, pod)
		}
		w.metrics.pods.WithLabelValues("gated", "").Inc()
	} else {
		w.metrics.pods.WithLabelValues("skipped", reason).Inc()
	}
	labels := admissionLabels(in, ok)
	w.metrics.latency.Observe(time.Since(start).Seconds())
	return ok, labels
}
