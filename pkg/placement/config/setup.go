package config

import (
	"context"
	"os"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/podcontroller"
)

// Setup adds the config controller, the status controller of the
// PodPlacementConfigs and the heartbeat to mgr, on the elected leader
// only; they release the gated pods of the pod controller's cache (pods,
// from podcontroller.Setup) when placement stops. Call the Controller's
// Finish once the manager has stopped: a leader stopped while the
// ClusterPodPlacementConfig lives hands the gated pods over to the next
// leader, and Finish waits for one (see handover.go).
func Setup(mgr ctrl.Manager, opts placement.Options, pods *podcontroller.Shared) (*Controller, error) {
	opts = opts.WithDefaults()
	c := &Controller{}
	configs := &configReconciler{
		client:            mgr.GetClient(),
		apiReader:         mgr.GetAPIReader(),
		pods:              pods.Cache,
		recorder:          mgr.GetEventRecorder("pod-placement-controller"),
		metrics:           pods.Metrics,
		webhookConfigName: opts.WebhookConfigurationName,
		ownNamespace:      opts.Namespace,
		releasePar:        opts.ReleaseParallelism,
		now:               time.Now,
		setVerbosity:      opts.SetLogVerbosity,
	}
	identity, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	c.heartbeat = &heartbeat{
		client: mgr.GetClient(), reader: mgr.GetAPIReader(), key: placement.HeartbeatKey(opts), identity: identity + "_" + string(uuid.NewUUID()),
		interval: opts.HeartbeatInterval, ttl: opts.HeartbeatTTL, now: time.Now,
		onStop: func(ctx context.Context) error {
			return configs.releaseOnStop(ctx, opts.AdmissionWindow)
		},
		onStopTimeout: opts.ReleaseOnStopTimeout,
		decide: func(ctx context.Context) stopAction {
			cfg := &multiarchv1beta1.ClusterPodPlacementConfig{}
			err := mgr.GetAPIReader().Get(ctx, types.NamespacedName{Name: multiarchv1beta1.ClusterPodPlacementConfigName}, cfg)
			return decideStop(cfg, err)
		},
		handoverTimeout: opts.HandoverTimeout,
		log:             mgr.GetLogger().WithName("placement-heartbeat"),
	}
	if err := mgr.Add(c.heartbeat); err != nil {
		return nil, err
	}
	if err := setupConfigStatus(mgr, pods.Applied); err != nil {
		return nil, err
	}
	toConfig := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []ctrl.Request {
		return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: multiarchv1beta1.ClusterPodPlacementConfigName}}}
	})
	err = ctrl.NewControllerManagedBy(mgr).
		Named("pod-placement-config").
		For(&multiarchv1beta1.ClusterPodPlacementConfig{}).
		Watches(&admissionregistrationv1.MutatingWebhookConfiguration{}, toConfig,
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == opts.WebhookConfigurationName }))).
		Complete(configs)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// setupConfigStatus adds the controller of the PodPlacementConfigs'
// priority claims and status. Claims are Leases labelled
// PriorityClaimLabel, in a cache of their own.
func setupConfigStatus(mgr ctrl.Manager, applied *podcontroller.AppliedCounter) error {
	hasLabel, err := labels.NewRequirement(placement.PriorityClaimLabel, selection.Exists, nil)
	if err != nil {
		return err
	}
	claims, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{&coordinationv1.Lease{}: {Label: labels.NewSelector().Add(*hasLabel)}},
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(placement.OnLeaderOnly{Cache: claims}); err != nil {
		return err
	}
	uncached, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	deleted := &deletedConfigs{}
	r := &configStatusReconciler{
		configs: mgr.GetCache(),
		claims:  claims,
		writer:  mgr.GetClient(),
		direct:  placement.PriorityClaims{Client: uncached, Grace: placement.PriorityClaimGrace, Now: time.Now},
		deleted: deleted,
		applied: applied,
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("pod-placement-config-status").
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&multiarchv1beta1.PodPlacementConfig{}), configStatusHandler(deleted, time.Now))).
		WatchesRawSource(source.Kind(claims, client.Object(&coordinationv1.Lease{}), handler.EnqueueRequestsFromMapFunc(claimToHolder))).
		WatchesRawSource(source.Channel(applied.Notify, configStatusHandler(deleted, time.Now))).
		Complete(r)
}
