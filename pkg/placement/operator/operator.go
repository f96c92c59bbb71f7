package operator

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
)

// operand is one component the operator runs: its Deployment, service
// account, ClusterRole and binding share the name.
type operand struct {
	name      string
	condition string
}

// operands are the placement controller and webhook.
var operands = []operand{
	{name: placement.ControllerName, condition: multiarchv1beta1.ConditionPodPlacementControllerNotRolledOut},
	{name: placement.WebhookComponentName, condition: multiarchv1beta1.ConditionPodPlacementWebhookNotRolledOut},
}

// reconciler starts the operand while the ClusterPodPlacementConfig exists
// and stops it when the config goes.
type reconciler struct {
	cache     client.Reader // the config, the CRD's metadata, the operand's Deployments and pods, archway's namespace
	reader    client.Reader // uncached: the operand's ClusterRoles and bindings, read by name
	client    client.Client // writes
	namespace string
	// operandLabels select the operand's Deployments and pods.
	operandLabels labels.Selector
	// desired is archway_placement_operand_desired_replicas.
	desired *prometheus.GaugeVec
	// recorder records the refusal of an OLM-owned CRD.
	recorder events.EventRecorder
	// refused is the CRD version and refusal last recorded, so that each is
	// recorded once (the controller runs one reconcile at a time).
	refused string
}

func (r *reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	if refused, err := r.refuseOLMCRD(ctx); refused || err != nil {
		return ctrl.Result{}, err
	}
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{}
	err := r.cache.Get(ctx, types.NamespacedName{Name: multiarchv1beta1.ClusterPodPlacementConfigName}, cfg)
	switch {
	case apierrors.IsNotFound(err):
		cfg = nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if cfg != nil && cfg.DeletionTimestamp == nil {
		err = r.start(ctx, cfg)
	} else {
		err = r.stop(ctx, cfg)
	}
	if apierrors.IsConflict(err) {
		// The config changed while we worked: its newer version is on its
		// way through the informer and is handled afresh.
		log.FromContext(ctx).V(1).Info("the config changed while reconciling; handling its newer version", "error", err.Error())
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// start holds the config with the operand finalizer, binds the operand's
// roles and scales its Deployments up, and reports their rollout.
func (r *reconciler) start(ctx context.Context, cfg *multiarchv1beta1.ClusterPodPlacementConfig) error {
	if controllerutil.AddFinalizer(cfg, placement.OperandFinalizer) {
		if err := r.client.Update(ctx, cfg); err != nil {
			return err
		}
	}
	// The bindings first: a component that starts without them fails its
	// first reads.
	for _, o := range operands {
		if err := r.ensureBinding(ctx, o.name); err != nil {
			return fmt.Errorf("binding %s's ClusterRole: %w", o.name, err)
		}
	}
	status := cfg.Status.DeepCopy()
	changed := false
	for _, o := range operands {
		d, err := r.deployment(ctx, o.name)
		if err != nil {
			return err
		}
		var desired int32
		var replicasErr error
		if d != nil {
			desired, replicasErr = replicasOf(d)
			if replicasErr == nil {
				r.desired.WithLabelValues(o.name).Set(float64(desired))
				if err := r.scale(ctx, d, desired); err != nil {
					return err
				}
			}
		}
		changed = setRolloutCondition(&status.Conditions, o.condition, o.name, rolloutOf(d, desired, replicasErr), cfg.Generation) || changed
	}
	if !changed {
		return nil
	}
	cfg.Status = *status
	return client.IgnoreNotFound(r.client.Status().Update(ctx, cfg))
}

// stop runs without a config, or with one being deleted: once the
// placement controller has released the gated pods (its finalizer is
// gone), both Deployments go to zero; once their pods have ended, the
// bindings are deleted; then the config may go.
func (r *reconciler) stop(ctx context.Context, cfg *multiarchv1beta1.ClusterPodPlacementConfig) error {
	logger := log.FromContext(ctx)
	held := cfg != nil && controllerutil.ContainsFinalizer(cfg, placement.OperandFinalizer)
	if cfg != nil {
		if held {
			uninstalling, err := r.namespaceDeleted(ctx)
			if err != nil {
				return err
			}
			if uninstalling {
				// archway is being uninstalled: its namespace's deletion
				// stops the operand, and deleting the ClusterRoles deletes
				// the bindings they own, with or without this operator, whose
				// own rights go at the same time. Let the config go now,
				// while the operator can.
				logger.Info("archway's namespace is being deleted: letting the config go")
				return r.letGo(ctx, cfg)
			}
		}
		if controllerutil.ContainsFinalizer(cfg, placement.ConfigFinalizer) {
			// The placement controller is releasing the gated pods; its
			// finalizer's removal brings the config back here.
			return nil
		}
	}
	for _, o := range operands {
		r.desired.WithLabelValues(o.name).Set(0)
	}
	pending, err := r.scaleDown(ctx)
	if err != nil {
		return err
	}
	if cfg != nil && held {
		detail := "the placement controller and webhook are stopped and their cluster-wide bindings deleted"
		if pending != "" {
			detail = "waiting for " + pending
		}
		status := cfg.Status.DeepCopy()
		if setStopping(&status.Conditions, detail, cfg.Generation) {
			cfg.Status = *status
			if err := r.client.Status().Update(ctx, cfg); err != nil {
				return client.IgnoreNotFound(err)
			}
		}
	}
	if pending != "" {
		// The pods' deletion brings the config back here.
		return nil
	}
	for _, o := range operands {
		deleted, err := r.deleteBinding(ctx, o.name)
		if err != nil {
			return fmt.Errorf("deleting %s's binding: %w", o.name, err)
		}
		if deleted {
			logger.Info("deleted the cluster-wide binding", "clusterRoleBinding", o.name)
		}
	}
	if held {
		return r.letGo(ctx, cfg)
	}
	return nil
}

// scaleDown scales both Deployments to zero and says what is still
// running ("" once no pod of theirs is left). A Deployment is done once
// its controller has seen the scale-down and counts no replica (its
// ReplicaSets create no more pods), and then its pods are listed from the
// apiserver, not the cache, which may not have seen the last one created;
// a pod that ended counts as gone.
func (r *reconciler) scaleDown(ctx context.Context) (string, error) {
	var pending []string
	for _, o := range operands {
		d, err := r.deployment(ctx, o.name)
		if err != nil {
			return "", err
		}
		switch {
		case d == nil:
		case d.Spec.Replicas == nil || *d.Spec.Replicas != 0:
			if err := r.scale(ctx, d, 0); err != nil {
				return "", err
			}
			pending = append(pending, o.name+" to scale to 0")
		case d.Status.ObservedGeneration < d.Generation || d.Status.Replicas > 0:
			pending = append(pending, o.name+" to scale to 0")
		}
	}
	if len(pending) > 0 {
		return strings.Join(pending, ", "), nil
	}
	var pods corev1.PodList
	if err := r.reader.List(ctx, &pods, client.InNamespace(r.namespace), client.MatchingLabelsSelector{Selector: r.operandLabels}); err != nil {
		return "", err
	}
	running := map[string]int{}
	for _, p := range pods.Items {
		// A pod that ended (evicted, or its process exited for good) runs
		// nothing, and nothing deletes it: its ReplicaSet counts it no
		// more and the pod garbage collector keeps thousands.
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		running[p.Labels[componentLabel]]++
	}
	for _, o := range operands {
		if n := running[o.name]; n > 0 {
			pending = append(pending, fmt.Sprintf("%d pods of %s to end", n, o.name))
		}
	}
	return strings.Join(pending, ", "), nil
}

// letGo removes the operand finalizer.
func (r *reconciler) letGo(ctx context.Context, cfg *multiarchv1beta1.ClusterPodPlacementConfig) error {
	if !controllerutil.RemoveFinalizer(cfg, placement.OperandFinalizer) {
		return nil
	}
	return client.IgnoreNotFound(r.client.Update(ctx, cfg))
}

// namespaceDeleted says whether archway's namespace is being deleted.
func (r *reconciler) namespaceDeleted(ctx context.Context) (bool, error) {
	ns := &corev1.Namespace{}
	if err := r.cache.Get(ctx, types.NamespacedName{Name: r.namespace}, ns); err != nil {
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	return ns.DeletionTimestamp != nil, nil
}

// deployment is the operand's Deployment from the cache, nil when it does
// not exist.
func (r *reconciler) deployment(ctx context.Context, name string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	err := r.cache.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: name}, d)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return d, err
}

// scale sets d's replicas through its scale subresource, the one write on
// Deployments the operator may make.
func (r *reconciler) scale(ctx context.Context, d *appsv1.Deployment, replicas int32) error {
	if d.Spec.Replicas != nil && *d.Spec.Replicas == replicas {
		return nil
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
	if err := r.client.SubResource("scale").Patch(ctx, d, patch, client.WithSubResourceBody(&autoscalingv1.Scale{})); err != nil {
		return fmt.Errorf("scaling Deployment %s to %d: %w", d.Name, replicas, err)
	}
	log.FromContext(ctx).Info("scaled", "deployment", d.Name, "replicas", replicas)
	return nil
}

// replicasOf is how many replicas d runs while the config exists: its
// ReplicasAnnotation, else its pod template's (OLM makes a CSV's
// Deployments from their spec alone, so the bundle carries the count
// there), 1 without either.
func replicasOf(d *appsv1.Deployment) (int32, error) {
	v, ok := d.Annotations[placement.ReplicasAnnotation]
	if !ok {
		v, ok = d.Spec.Template.Annotations[placement.ReplicasAnnotation]
	}
	if !ok {
		return 1, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("annotation %s is %q: write a number of replicas, 1 or more", placement.ReplicasAnnotation, v)
	}
	return int32(n), nil
}

// componentLabel names the operand's pods and Deployments.
const componentLabel = "app.kubernetes.io/name"
