package placement

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement/image"
	"github.com/archway-build/archway/pkg/placement/registries"
)

// The permissions of the two components, each with the reason for every
// rule, are written by hand in manifests/placement/rbac (one package holds
// both, and controller-gen makes one role per package); the install test
// on the bed runs each component under its own role. The controller's
// registry configuration reads ConfigMaps of archway's namespace only
// (a Role) and OpenShift's mirror sets.

// ConfigureControllerCache narrows the manager's cache of the process that
// runs the placement controller: of the MutatingWebhookConfigurations it
// reads and updates only its own (Options.WebhookConfigurationName, the
// default name), so its role can name that one object.
func ConfigureControllerCache(o *cache.Options) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&admissionregistrationv1.MutatingWebhookConfiguration{}] = cache.ByObject{
		Field: fields.OneTermEqualSelector("metadata.name", WebhookConfigurationName),
	}
}

// gatedSelector selects the pods the webhook gated and the controller has
// not released yet: what the webhook's event informer watches.
func gatedSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{SchedulingGateLabel: SchedulingGateLabelGated})
}

// unboundSelector selects the pods no node has been chosen for: every pod
// carrying the gate is among them, whoever added the gate (the webhook, a
// template or backup that kept it, an earlier placement controller), so
// none is missed; a cluster's running pods cost the controller nothing.
func unboundSelector() fields.Selector {
	return fields.OneTermEqualSelector("spec.nodeName", "")
}

// heartbeatKey is the heartbeat lease of opts.
func heartbeatKey(opts Options) types.NamespacedName {
	ns := opts.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return types.NamespacedName{Namespace: ns, Name: HeartbeatLeaseName}
}

// podName is a cache transform keeping of a pod's metadata only what ties
// a gate event to the pod: memory per gated pod stays small however many
// labels, annotations and managed fields the pods carry.
func podName(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, GenerateName: m.GenerateName, UID: m.UID, ResourceVersion: m.ResourceVersion,
	}}, nil
}

// onEveryReplica runs a cache on every replica, leader or not: the
// webhook, served by all of them, reads it. The manager decides where a
// runnable runs by its NeedLeaderElection, and only controller-runtime's
// plain informer cache says false: a cache narrowed to namespaces or with
// options per object would otherwise start only on the leader, and a
// standby replica's webhook would never be ready.
type onEveryReplica struct{ cache.Cache }

// NeedLeaderElection: no, the webhook needs it everywhere.
func (onEveryReplica) NeedLeaderElection() bool { return false }

// onLeaderOnly runs a cache on the elected leader only: only the leader's
// controllers read it, so a standby spends no memory on pods it does not
// place, and the new leader fills it when it takes over.
type onLeaderOnly struct{ cache.Cache }

// NeedLeaderElection: yes, only the leader's controllers read it.
func (onLeaderOnly) NeedLeaderElection() bool { return true }

var (
	_ manager.LeaderElectionRunnable = onEveryReplica{}
	_ manager.LeaderElectionRunnable = onLeaderOnly{}
)

// gateEventTTL is how long the webhook waits to see a pod it gated
// persisted before it stops expecting it.
const gateEventTTL = time.Minute

// SetupWebhook registers the gate webhook at WebhookPath, and the
// validation of PodPlacementConfigs and of the ClusterPodPlacementConfig's
// deletion, on mgr's webhook server. It runs on every replica (no leader election) and reads only the
// manager's informer cache, whose informers it starts up front so that no
// admission ever waits for one; a readiness check named
// "placement-webhook-cache" fails until they have synced. Metrics are
// registered with reg.
func SetupWebhook(mgr ctrl.Manager, opts Options, reg prometheus.Registerer) error {
	opts = opts.withDefaults()
	ctx := context.Background()
	metrics, err := newWebhookMetrics(reg)
	if err != nil {
		return fmt.Errorf("placement webhook metrics: %w", err)
	}
	for _, obj := range []client.Object{&multiarchv1beta1.ClusterPodPlacementConfig{}, &multiarchv1beta1.PodPlacementConfig{}, &corev1.Namespace{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("placement webhook: informer for %T: %w", obj, err)
		}
	}
	events := newGateEvents(mgr.GetEventRecorder("pod-placement-webhook"), gateEventTTL)
	// Gated pods' names only: enough to tie an event to a pod, whatever
	// else the pods carry.
	gated, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultLabelSelector: gatedSelector(),
		DefaultTransform:     podName,
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(onEveryReplica{gated}); err != nil {
		return err
	}
	// The heartbeat lease alone, to gate only while a controller runs.
	key := heartbeatKey(opts)
	leases, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces:    map[string]cache.Config{key.Namespace: {}},
		DefaultFieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(onEveryReplica{leases}); err != nil {
		return err
	}
	if _, err := leases.GetInformer(ctx, &coordinationv1.Lease{}); err != nil {
		return fmt.Errorf("placement webhook: informer for the heartbeat lease: %w", err)
	}
	podMeta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}}
	informer, err := gated.GetInformer(ctx, podMeta)
	if err != nil {
		return err
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			events.observe(&corev1.ObjectReference{
				APIVersion: "v1", Kind: "Pod", Namespace: m.Namespace, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
			}, m.GenerateName)
		}
	}}); err != nil {
		return err
	}
	// Claims are read and written through the apiserver only.
	uncached, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	wh := &gateWebhook{
		decoder:      admission.NewDecoder(mgr.GetScheme()),
		cache:        mgr.GetCache(),
		leases:       leases,
		heartbeat:    key,
		now:          time.Now,
		ownNamespace: opts.Namespace,
		events:       events,
		metrics:      metrics,
		log:          mgr.GetLogger().WithName("placement-webhook"),
	}
	mgr.GetWebhookServer().Register(WebhookPath, &admission.Webhook{Handler: wh})
	mgr.GetWebhookServer().Register(PodPlacementConfigValidationPath,
		admission.WithValidator[*multiarchv1beta1.PodPlacementConfig](mgr.GetScheme(), podPlacementConfigValidator{
			cache:  mgr.GetCache(),
			claims: priorityClaims{client: uncached, grace: priorityClaimGrace, now: time.Now},
		}))
	mgr.GetWebhookServer().Register(ClusterPodPlacementConfigValidationPath,
		admission.WithValidator[*multiarchv1beta1.ClusterPodPlacementConfig](mgr.GetScheme(), clusterConfigValidator{cache: mgr.GetCache()}))
	return mgr.AddReadyzCheck("placement-webhook-cache", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) || !gated.WaitForCacheSync(ctx) || !leases.WaitForCacheSync(ctx) {
			return fmt.Errorf("placement webhook informers have not synced")
		}
		return nil
	})
}

// SetupController adds the pod placement controller and the config
// controller to mgr. Both run on the elected leader only. They share a
// cache of their own holding gated pods, docker config secrets and service
// accounts; the config and the webhook configuration come from the
// manager's cache. Metrics are registered with reg. Call the Controller's
// Finish once the manager has stopped: a leader stopped while the
// ClusterPodPlacementConfig lives hands the gated pods over to the next
// leader, and Finish waits for one (see handover.go).
func SetupController(mgr ctrl.Manager, opts Options, reg prometheus.Registerer) (*Controller, error) {
	c := &Controller{}
	if err := setupController(mgr, opts, reg, c); err != nil {
		return nil, err
	}
	return c, nil
}

// setupController does SetupController's work, filling c.
func setupController(mgr ctrl.Manager, opts Options, reg prometheus.Registerer, c *Controller) error {
	opts = opts.withDefaults()
	metrics, err := newControllerMetrics(reg)
	if err != nil {
		return fmt.Errorf("placement controller metrics: %w", err)
	}
	placementCache, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			// Unbound pods labelled gated: the pods to place, whatever else
			// is pending in the cluster. Pods carrying the gate without the
			// label are labelled by the webhook or the sweeper.
			&corev1.Pod{}:            {Label: gatedSelector(), Field: unboundSelector()},
			&corev1.Secret{}:         {Field: fields.OneTermEqualSelector("type", string(corev1.SecretTypeDockerConfigJson))},
			&corev1.ServiceAccount{}: {},
			// Completed Builds' outputs only, for images they pushed.
			&buildv1.Build{}: {Transform: builtOutput},
		},
	})
	if err != nil {
		return err
	}
	// Legacy kubernetes.io/dockercfg pull secrets, which kubelets still
	// honour, in a second cache: a cache has one selector per type.
	legacySecrets, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Field: fields.OneTermEqualSelector("type", string(corev1.SecretTypeDockercfg))},
		},
	})
	if err != nil {
		return err
	}
	for _, c := range []cache.Cache{placementCache, legacySecrets} {
		if err := mgr.Add(onLeaderOnly{c}); err != nil {
			return err
		}
	}
	for field, index := range map[string]client.IndexerFunc{
		buildOutputRepositoryIndex: indexBuildOutputRepository,
		buildOutputDigestIndex:     indexBuildOutputDigest,
	} {
		if err := placementCache.IndexField(context.Background(), &buildv1.Build{}, field, index); err != nil {
			return fmt.Errorf("placement controller: index %s of Builds: %w", field, err)
		}
	}
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Secret{}, &corev1.ServiceAccount{}, &buildv1.Build{}} {
		if _, err := placementCache.GetInformer(context.Background(), obj); err != nil {
			return fmt.Errorf("placement controller: informer for %T: %w", obj, err)
		}
	}
	if _, err := legacySecrets.GetInformer(context.Background(), &corev1.Secret{}); err != nil {
		return fmt.Errorf("placement controller: informer for dockercfg secrets: %w", err)
	}
	if _, err := mgr.GetCache().GetInformer(context.Background(), &multiarchv1beta1.PodPlacementConfig{}); err != nil {
		return fmt.Errorf("placement controller: informer for PodPlacementConfigs: %w", err)
	}
	registryConfig, err := registries.Setup(mgr, registries.WatchOptions{
		Namespace: heartbeatKey(opts).Namespace, ConfigMap: opts.RegistriesConfigMap,
		RegistryCAConfigMap: opts.RegistryCAConfigMap, TrustedCAConfigMap: opts.TrustedCAConfigMap,
		BaseFile: opts.RegistriesConfPath, InsecureRegistries: opts.InsecureRegistries, Dir: opts.RegistriesDir,
		Recorder: mgr.GetEventRecorder("pod-placement-controller"),
	})
	if err != nil {
		return fmt.Errorf("placement controller: registry configuration: %w", err)
	}
	remote := image.NewRemote(image.RemoteOptions{
		InsecureRegistries: opts.InsecureRegistries,
		Registries:         registryConfig,
		Timeout:            opts.InspectionTimeout,
	})
	inspector := image.NewCache(instrumentedRegistry{inner: remote, metrics: metrics}, image.CacheOptions{
		DigestTTL: opts.DigestCacheTTL, TagTTL: opts.TagCacheTTL, Size: opts.CacheSize, OnLookup: metrics.cacheLookup,
	})
	// A new registry configuration can change any answer: forget them all.
	registryConfig.Subscribe(func(*registries.Settings) { inspector.Purge() })
	applied := newAppliedCounter()
	pods := &podReconciler{
		pods:      placementCache,
		configs:   mgr.GetCache(),
		writer:    mgr.GetClient(),
		secrets:   pullSecrets{cached: placementCache, legacy: legacySecrets, direct: mgr.GetAPIReader(), global: opts.GlobalPullSecret},
		inspector: inspector,
		built:     &builtImages{builds: placementCache, resolver: inspector},
		recorder:  mgr.GetEventRecorder("pod-placement-controller"),
		metrics:   metrics,
		retries:   newRetryTracker(),
		policy: retryPolicy{
			tries: opts.InspectionTries, base: opts.InspectionBackoff, max: opts.InspectionMaxBackoff, deadline: opts.InspectionDeadline,
		},
		imagePar: opts.ImageParallelism,
		applied:  applied,
		now:      time.Now,
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("pod-placement").
		WatchesRawSource(source.Kind(placementCache, &corev1.Pod{}, &handler.TypedEnqueueRequestForObject[*corev1.Pod]{},
			predicate.NewTypedPredicateFuncs(func(p *corev1.Pod) bool { return hasGate(p) }))).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Workers}).
		Complete(pods)
	if err != nil {
		return err
	}
	configs := &configReconciler{
		client:            mgr.GetClient(),
		apiReader:         mgr.GetAPIReader(),
		pods:              placementCache,
		recorder:          mgr.GetEventRecorder("pod-placement-controller"),
		metrics:           metrics,
		webhookConfigName: opts.WebhookConfigurationName,
		ownNamespace:      opts.Namespace,
		releasePar:        opts.ReleaseParallelism,
		now:               time.Now,
		setVerbosity:      opts.SetLogVerbosity,
	}
	identity, err := os.Hostname()
	if err != nil {
		return err
	}
	c.heartbeat = &heartbeat{
		client: mgr.GetClient(), reader: mgr.GetAPIReader(), key: heartbeatKey(opts), identity: identity + "_" + string(uuid.NewUUID()),
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
		return err
	}
	if err := mgr.Add(&gateSweeper{
		reader: mgr.GetAPIReader(), writer: mgr.GetClient(), interval: opts.GateSweepInterval,
		log: mgr.GetLogger().WithName("placement-gate-sweeper"),
	}); err != nil {
		return err
	}
	if err := setupConfigStatus(mgr, applied); err != nil {
		return err
	}
	toConfig := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []ctrl.Request {
		return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: multiarchv1beta1.ClusterPodPlacementConfigName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("pod-placement-config").
		For(&multiarchv1beta1.ClusterPodPlacementConfig{}).
		Watches(&admissionregistrationv1.MutatingWebhookConfiguration{}, toConfig,
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == opts.WebhookConfigurationName }))).
		Complete(configs)
}

// setupConfigStatus adds the controller of the PodPlacementConfigs'
// priority claims and status. Claims are Leases labelled
// PriorityClaimLabel, in a cache of their own.
func setupConfigStatus(mgr ctrl.Manager, applied *appliedCounter) error {
	hasLabel, err := labels.NewRequirement(PriorityClaimLabel, selection.Exists, nil)
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
	if err := mgr.Add(onLeaderOnly{claims}); err != nil {
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
		direct:  priorityClaims{client: uncached, grace: priorityClaimGrace, now: time.Now},
		deleted: deleted,
		applied: applied,
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("pod-placement-config-status").
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&multiarchv1beta1.PodPlacementConfig{}), configStatusHandler(deleted, time.Now))).
		WatchesRawSource(source.Kind(claims, client.Object(&coordinationv1.Lease{}), handler.EnqueueRequestsFromMapFunc(claimToHolder))).
		WatchesRawSource(source.Channel(applied.notify, configStatusHandler(deleted, time.Now))).
		Complete(r)
}
