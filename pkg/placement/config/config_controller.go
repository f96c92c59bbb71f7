package config

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/podcontroller"
)

// configReconciler keeps the webhook configuration in step with the
// ClusterPodPlacementConfig, reports it in the config's status, and
// releases every gated pod when the config goes.
type configReconciler struct {
	client            client.Client // the manager's client (cached reads)
	apiReader         client.Reader // uncached, for rereads after conflicts
	pods              client.Reader // the gated-pod cache
	recorder          events.EventRecorder
	metrics           *podcontroller.ControllerMetrics
	webhookConfigName string
	ownNamespace      string
	releasePar        int
	now               func() time.Time
	setVerbosity      func(v int)
}

// verbosity maps spec.logVerbosity to a logr verbosity.
func verbosity(level multiarchv1beta1.LogVerbosityLevel) int {
	switch level {
	case multiarchv1beta1.LogVerbosityDebug:
		return 1
	case multiarchv1beta1.LogVerbosityTrace:
		return 2
	case multiarchv1beta1.LogVerbosityTraceAll:
		return 3
	}
	return 0
}

func (r *configReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		// The config changed while we worked: its newer version is on its
		// way through the informer and is handled afresh. Not an error.
		log.FromContext(ctx).V(1).Info("the config changed while reconciling; handling its newer version", "error", err.Error())
		return ctrl.Result{}, nil
	}
	return res, err
}

func (r *configReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{}
	if err := r.client.Get(ctx, req.NamespacedName, cfg); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		if r.setVerbosity != nil {
			r.setVerbosity(0)
		}
		// Gone without our finalizer (removed by hand, or the controller
		// was not running): pods gated meanwhile must not wait forever.
		// The pods in the cache are enough: a gated pod outside it is
		// labelled by the sweeper, and then released by the pod controller
		// (which finds no config either).
		return ctrl.Result{}, r.releaseCached(ctx, "no ClusterPodPlacementConfig exists")
	}
	if r.setVerbosity != nil {
		r.setVerbosity(verbosity(cfg.Spec.LogVerbosity))
	}
	if cfg.DeletionTimestamp != nil {
		return r.deprovision(ctx, cfg)
	}
	if controllerutil.AddFinalizer(cfg, placement.ConfigFinalizer) {
		if err := r.client.Update(ctx, cfg); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	syncErr := r.syncWebhook(ctx, cfg)
	status := cfg.Status.DeepCopy()
	setConfigConditions(status, cfg.Generation, syncErr)
	if err := r.writeStatus(ctx, cfg, status); err != nil {
		return ctrl.Result{}, err
	}
	if syncErr != nil {
		return ctrl.Result{}, syncErr
	}
	return ctrl.Result{}, nil
}

// deprovision releases the gated pods of a config being deleted, then
// lets it go.
func (r *configReconciler) deprovision(ctx context.Context, cfg *multiarchv1beta1.ClusterPodPlacementConfig) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(cfg, placement.ConfigFinalizer) {
		return ctrl.Result{}, nil
	}
	status := cfg.Status.DeepCopy()
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: multiarchv1beta1.ConditionDeprovisioning, Status: metav1.ConditionTrue, Reason: multiarchv1beta1.ReasonUngatingPods,
		Message: "Releasing the gated pods before the config is removed", ObservedGeneration: cfg.Generation,
	})
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: multiarchv1beta1.ConditionAvailable, Status: metav1.ConditionFalse, Reason: multiarchv1beta1.ReasonUngatingPods,
		Message: "The config is being deleted: new pods are not gated", ObservedGeneration: cfg.Generation,
	})
	if err := r.writeStatus(ctx, cfg, status); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.releaseAll(ctx, "the ClusterPodPlacementConfig was deleted"); err != nil {
		return ctrl.Result{}, err
	}
	controllerutil.RemoveFinalizer(cfg, placement.ConfigFinalizer)
	if err := r.client.Update(ctx, cfg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

// releaseOnStop releases every gated pod when the controller is told to
// go, after the heartbeat lease was released: once from the apiserver, and
// again after window, for pods whose admission saw the heartbeat still
// fresh and whose create completed after the first pass.
//
// A config being deleted then loses its finalizer: its pods are released,
// and no controller may be left to do it (`kubectl delete -k` deletes the
// config and then archway's namespace, which stops this controller).
func (r *configReconciler) releaseOnStop(ctx context.Context, window time.Duration) error {
	const why = "the placement controller stopped"
	if err := r.releaseAll(ctx, why); err != nil {
		return err
	}
	if err := r.letDeletedConfigGo(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(window):
	}
	return r.releaseAll(ctx, why)
}

// letDeletedConfigGo removes the finalizer of the ClusterPodPlacementConfig
// when it is being deleted, read from the apiserver (the cache may not have
// seen the deletion yet).
func (r *configReconciler) letDeletedConfigGo(ctx context.Context) error {
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Name: multiarchv1beta1.ClusterPodPlacementConfigName}, cfg)
	if err != nil || cfg.DeletionTimestamp == nil || !controllerutil.RemoveFinalizer(cfg, placement.ConfigFinalizer) {
		return client.IgnoreNotFound(err)
	}
	return client.IgnoreNotFound(r.client.Update(ctx, cfg))
}

// releaseAll removes the gate from every gated pod the apiserver has,
// labelled or not (the controller's cache holds the labelled ones only),
// several at once. The unbound pods are read a page at a time and only the
// gated ones kept.
func (r *configReconciler) releaseAll(ctx context.Context, why string) error {
	var gated []*corev1.Pod
	if err := podcontroller.ForEachUnboundPod(ctx, r.apiReader, func(pod *corev1.Pod) error {
		if placement.HasGate(pod) {
			gated = append(gated, pod)
		}
		return nil
	}); err != nil {
		return err
	}
	return r.releasePods(ctx, gated, why)
}

// releaseCached removes the gate from the gated pods of the controller's
// cache.
func (r *configReconciler) releaseCached(ctx context.Context, why string) error {
	list := &corev1.PodList{}
	if err := r.pods.List(ctx, list); err != nil {
		return err
	}
	var gated []*corev1.Pod
	for i := range list.Items {
		if placement.HasGate(&list.Items[i]) {
			gated = append(gated, &list.Items[i])
		}
	}
	return r.releasePods(ctx, gated, why)
}

// releasePods releases pods, several at once.
func (r *configReconciler) releasePods(ctx context.Context, pods []*corev1.Pod, why string) error {
	var (
		mu   sync.Mutex
		errs []error
		g    errgroup.Group
	)
	g.SetLimit(r.releasePar)
	for _, pod := range pods {
		g.Go(func() error {
			// Every pod is tried: the errors are joined, not the first kept.
			if err := r.release(ctx, pod, why); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// release removes the gate from one pod, rereading it after a conflict.
func (r *configReconciler) release(ctx context.Context, pod *corev1.Pod, why string) error {
	for range 5 {
		d := podcontroller.ReleaseWithoutConfig(pod, why)
		err := r.client.Update(ctx, d.Pod)
		switch {
		case err == nil:
			r.metrics.Pods.WithLabelValues(d.Outcome).Inc()
			r.metrics.Gated.Observe(r.now().Sub(pod.CreationTimestamp.Time).Seconds())
			r.recorder.Eventf(d.Pod, nil, d.EventType, d.Reason, "Release", "%s", d.Message)
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return fmt.Errorf("releasing pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		fresh := &corev1.Pod{}
		if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(pod), fresh); err != nil {
			return client.IgnoreNotFound(err)
		}
		if !placement.HasGate(fresh) {
			return nil
		}
		pod = fresh
	}
	return fmt.Errorf("releasing pod %s/%s: still conflicting after 5 tries", pod.Namespace, pod.Name)
}

// syncWebhook copies the config's namespaceSelector into the webhook
// configuration.
func (r *configReconciler) syncWebhook(ctx context.Context, cfg *multiarchv1beta1.ClusterPodPlacementConfig) error {
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: r.webhookConfigName}, mwc); err != nil {
		if apierrors.IsNotFound(err) {
			return &webhookConfigError{reason: multiarchv1beta1.ReasonWebhookConfigurationNotFound,
				msg: fmt.Sprintf("MutatingWebhookConfiguration %s does not exist", r.webhookConfigName)}
		}
		return err
	}
	found, changed := syncWebhookSelector(mwc, webhookNamespaceSelector(cfg.Spec.NamespaceSelector, r.ownNamespace))
	if !found {
		return &webhookConfigError{reason: multiarchv1beta1.ReasonWebhookConfigurationNotFound,
			msg: fmt.Sprintf("MutatingWebhookConfiguration %s has no webhook named %s", r.webhookConfigName, placement.WebhookName)}
	}
	if !changed {
		return nil
	}
	if err := r.client.Update(ctx, mwc); err != nil {
		return &webhookConfigError{reason: multiarchv1beta1.ReasonWebhookConfigurationSyncFailed,
			msg: fmt.Sprintf("updating MutatingWebhookConfiguration %s: %v", r.webhookConfigName, err), err: err}
	}
	log.FromContext(ctx).Info("synced the webhook's namespaceSelector", "webhookConfiguration", r.webhookConfigName)
	return nil
}

// webhookConfigError says why the webhook configuration is not in sync,
// with the condition reason to report.
type webhookConfigError struct {
	reason, msg string
	err         error
}

func (e *webhookConfigError) Error() string { return e.msg }
func (e *webhookConfigError) Unwrap() error { return e.err }

// setConfigConditions computes the conditions of a live config from the
// result of the webhook sync.
func setConfigConditions(status *multiarchv1beta1.ClusterPodPlacementConfigStatus, generation int64, syncErr error) {
	status.ObservedGeneration = generation
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation})
	}
	meta.RemoveStatusCondition(&status.Conditions, multiarchv1beta1.ConditionDeprovisioning)
	if syncErr == nil {
		set(multiarchv1beta1.ConditionAvailable, metav1.ConditionTrue, multiarchv1beta1.ReasonReconciled, "New pods in the selected namespaces are gated and placed")
		set(multiarchv1beta1.ConditionProgressing, metav1.ConditionFalse, multiarchv1beta1.ReasonReconciled, "The webhook configuration matches the spec")
		set(multiarchv1beta1.ConditionDegraded, metav1.ConditionFalse, multiarchv1beta1.ReasonReconciled, "")
		return
	}
	reason := multiarchv1beta1.ReasonWebhookConfigurationSyncFailed
	var wce *webhookConfigError
	if errors.As(syncErr, &wce) {
		reason = wce.reason
	}
	set(multiarchv1beta1.ConditionAvailable, metav1.ConditionFalse, reason, syncErr.Error())
	set(multiarchv1beta1.ConditionProgressing, metav1.ConditionTrue, reason, "Waiting for the webhook configuration")
	set(multiarchv1beta1.ConditionDegraded, metav1.ConditionTrue, reason, syncErr.Error())
}

// writeStatus writes status when it differs from the stored one.
func (r *configReconciler) writeStatus(ctx context.Context, cfg *multiarchv1beta1.ClusterPodPlacementConfig, status *multiarchv1beta1.ClusterPodPlacementConfigStatus) error {
	if equalStatus(&cfg.Status, status) {
		return nil
	}
	cfg.Status = *status
	return client.IgnoreNotFound(r.client.Status().Update(ctx, cfg))
}

func equalStatus(a, b *multiarchv1beta1.ClusterPodPlacementConfigStatus) bool {
	if a.ObservedGeneration != b.ObservedGeneration || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for _, c := range a.Conditions {
		o := meta.FindStatusCondition(b.Conditions, c.Type)
		if o == nil || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message || o.ObservedGeneration != c.ObservedGeneration {
			return false
		}
	}
	return true
}
