package operator

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
)

// Setup adds the placement operator to mgr, on the elected leader. It
// reads, from a cache of its own, the ClusterPodPlacementConfig and its
// CRD's metadata (by name), archway's namespace (by name), and the
// operand's Deployments and pods in it (by label); the operand's
// ClusterRoles and bindings are read by name from the apiserver.
func Setup(mgr ctrl.Manager, namespace string, reg prometheus.Registerer) error {
	if namespace == "" {
		namespace = "default"
	}
	names := make([]string, 0, len(operands))
	for _, o := range operands {
		names = append(names, o.name)
	}
	isOperand, err := labels.NewRequirement(componentLabel, selection.In, names)
	if err != nil {
		return err
	}
	operandLabels := labels.NewSelector().Add(*isOperand)
	inNamespace := map[string]cache.Config{namespace: {}}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&multiarchv1beta1.ClusterPodPlacementConfig{}: {Field: fields.OneTermEqualSelector("metadata.name", multiarchv1beta1.ClusterPodPlacementConfigName)},
			newCRDMetadata():     {Field: fields.OneTermEqualSelector("metadata.name", placement.ClusterPodPlacementConfigCRDName)},
			&corev1.Namespace{}:  {Field: fields.OneTermEqualSelector("metadata.name", namespace)},
			&appsv1.Deployment{}: {Namespaces: inNamespace, Label: operandLabels},
			&corev1.Pod{}:        {Namespaces: inNamespace, Label: operandLabels},
		},
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(placement.OnLeaderOnly{Cache: c}); err != nil {
		return err
	}
	desired, err := newDesiredReplicas(reg)
	if err != nil {
		return fmt.Errorf("placement operator metrics: %w", err)
	}
	r := &reconciler{cache: c, reader: mgr.GetAPIReader(), client: mgr.GetClient(), namespace: namespace, operandLabels: operandLabels, desired: desired,
		recorder: mgr.GetEventRecorder("placement-operator")}
	// Every change comes down to one question: is the config there?
	toConfig := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []ctrl.Request {
		return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: multiarchv1beta1.ClusterPodPlacementConfigName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("placement-operator").
		WatchesRawSource(source.Kind(c, client.Object(&multiarchv1beta1.ClusterPodPlacementConfig{}), toConfig)).
		WatchesRawSource(source.Kind(c, client.Object(newCRDMetadata()), toConfig)).
		WatchesRawSource(source.Kind(c, client.Object(&corev1.Namespace{}), toConfig)).
		WatchesRawSource(source.Kind(c, client.Object(&appsv1.Deployment{}), toConfig)).
		WatchesRawSource(source.Kind(c, client.Object(&corev1.Pod{}), toConfig)).
		Complete(r)
}
