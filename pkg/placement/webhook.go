package placement

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// gateWebhook adds the scheduling gate to new pods. It reads only
// informer caches (the config and namespaces) and never fails admission:
// whatever goes wrong, the pod is admitted ungated.
type gateWebhook struct {
	cache        client.Reader
	ownNamespace string
	events       *gateEvents
	metrics      *webhookMetrics
	log          logr.Logger
}

var _ admission.Defaulter[*corev1.Pod] = (*gateWebhook)(nil)

// Default gates the pod when shouldGate says so.
func (w *gateWebhook) Default(ctx context.Context, pod *corev1.Pod) error {
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
	}
	if in.config != nil && in.config.Spec.NamespaceSelector != nil {
		ns := &corev1.Namespace{}
		if err := w.cache.Get(ctx, types.NamespacedName{Name: namespace}, ns); err == nil {
			in.namespaceLabels = labels.Set(ns.Labels)
		}
	}
	ok, reason := shouldGate(in)
	if ok {
		gate(pod)
		if !dryRun {
			w.events.expect(namespace, pod)
		}
		w.metrics.pods.WithLabelValues("gated", "").Inc()
	} else {
		w.metrics.pods.WithLabelValues("skipped", reason).Inc()
	}
	w.metrics.latency.Observe(time.Since(start).Seconds())
	return nil
}
