package podcontroller

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/image"
	"github.com/archway-build/archway/pkg/placement/registries"
)

// Shared is what the pod placement controller shares with the config
// controller: the cache of gated pods, the metrics of released pods and
// the counts of pods placed with each PodPlacementConfig's preferences.
type Shared struct {
	Cache   cache.Cache
	Metrics *ControllerMetrics
	Applied *AppliedCounter
}

// Setup adds the pod placement controller and the gate sweeper to mgr,
// on the elected leader only, with a cache of their own holding gated
// pods, docker config secrets, service accounts and built images; the
// configs come from the manager's cache. Metrics are registered with reg.
// Pass what it returns to config.Setup.
func Setup(mgr ctrl.Manager, opts placement.Options, reg prometheus.Registerer) (*Shared, error) {
	opts = opts.WithDefaults()
	if opts.GlobalPullSecret.Name == "" {
		// On OpenShift, every node pulls with openshift-config/pull-secret:
		// so does the inspection, unless another secret is named.
		openShift, err := registries.OnOpenShift(mgr.GetRESTMapper())
		if err != nil {
			return nil, err
		}
		if openShift {
			opts.GlobalPullSecret = registries.OpenShiftPullSecret
		}
	}
	metrics, err := newControllerMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("placement controller metrics: %w", err)
	}
	placementCache, legacySecrets, err := newCaches(mgr)
	if err != nil {
		return nil, err
	}
	if err := reg.Register(newGatedCollector(placementCache)); err != nil {
		return nil, fmt.Errorf("placement controller metrics: %w", err)
	}
	inspector, err := newInspector(mgr, opts, metrics)
	if err != nil {
		return nil, err
	}
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
		imagePar:  opts.ImageParallelism,
		maxImages: opts.MaxImagesPerPod,
		timeout:   opts.ReconcileTimeout,
		applied:   applied,
		now:       time.Now,
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("pod-placement").
		WatchesRawSource(source.Kind(placementCache, &corev1.Pod{}, &handler.TypedEnqueueRequestForObject[*corev1.Pod]{},
			predicate.NewTypedPredicateFuncs(func(p *corev1.Pod) bool { return placement.HasGate(p) }))).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Workers}).
		Complete(pods)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(&gateSweeper{
		reader: mgr.GetAPIReader(), writer: mgr.GetClient(), interval: opts.GateSweepInterval,
		log: mgr.GetLogger().WithName("placement-gate-sweeper"),
	}); err != nil {
		return nil, err
	}
	return &Shared{Cache: placementCache, Metrics: metrics, Applied: applied}, nil
}

// newCaches makes the pod controller's caches, run on the leader only:
// unbound gated pods, docker config secrets, service accounts and
// completed Builds' outputs in one, legacy dockercfg secrets in another;
// it starts their informers up front, and the manager's informer of
// PodPlacementConfigs.
func newCaches(mgr ctrl.Manager) (placementCache, legacySecrets cache.Cache, err error) {
	placementCache, err = cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			// Unbound pods labelled gated: the pods to place, whatever else
			// is pending in the cluster. Pods carrying the gate without the
			// label are labelled by the webhook or the sweeper.
			&corev1.Pod{}:            {Label: placement.GatedSelector(), Field: placement.UnboundSelector()},
			&corev1.Secret{}:         {Field: fields.OneTermEqualSelector("type", string(corev1.SecretTypeDockerConfigJson))},
			&corev1.ServiceAccount{}: {},
			// Completed Builds' outputs only, for images they pushed.
			&buildv1.Build{}: {Transform: builtOutput},
		},
	})
	if err != nil {
		return nil, nil, err
	}
	// Legacy kubernetes.io/dockercfg pull secrets, which kubelets still
	// honour, in a second cache: a cache has one selector per type.
	legacySecrets, err = cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Field: fields.OneTermEqualSelector("type", string(corev1.SecretTypeDockercfg))},
		},
	})
	if err != nil {
		return nil, nil, err
	}
	for _, c := range []cache.Cache{placementCache, legacySecrets} {
		if err := mgr.Add(placement.OnLeaderOnly{Cache: c}); err != nil {
			return nil, nil, err
		}
	}
	for field, index := range map[string]client.IndexerFunc{
		buildOutputRepositoryIndex: indexBuildOutputRepository,
		buildOutputDigestIndex:     indexBuildOutputDigest,
	} {
		if err := placementCache.IndexField(context.Background(), &buildv1.Build{}, field, index); err != nil {
			return nil, nil, fmt.Errorf("placement controller: index %s of Builds: %w", field, err)
		}
	}
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Secret{}, &corev1.ServiceAccount{}, &buildv1.Build{}} {
		if _, err := placementCache.GetInformer(context.Background(), obj); err != nil {
			return nil, nil, fmt.Errorf("placement controller: informer for %T: %w", obj, err)
		}
	}
	if _, err := legacySecrets.GetInformer(context.Background(), &corev1.Secret{}); err != nil {
		return nil, nil, fmt.Errorf("placement controller: informer for dockercfg secrets: %w", err)
	}
	if _, err := mgr.GetCache().GetInformer(context.Background(), &multiarchv1beta1.PodPlacementConfig{}); err != nil {
		return nil, nil, fmt.Errorf("placement controller: informer for PodPlacementConfigs: %w", err)
	}
	return placementCache, legacySecrets, nil
}

// newInspector makes the image inspector: registry calls with the
// registry configuration placement watches, behind a cache of digests and
// tags that a new registry configuration empties.
func newInspector(mgr ctrl.Manager, opts placement.Options, metrics *ControllerMetrics) (*image.Cache, error) {
	registryConfig := opts.Registries
	if registryConfig == nil {
		var err error
		if registryConfig, err = placement.SetupRegistries(mgr, opts); err != nil {
			return nil, fmt.Errorf("placement controller: registry configuration: %w", err)
		}
	}
	remote := image.NewRemote(image.RemoteOptions{
		InsecureRegistries: opts.InsecureRegistries,
		Registries:         registryConfig,
		Timeout:            opts.InspectionTimeout,
	})
	inspector := image.NewCache(instrumentedRegistry{inner: remote, metrics: metrics}, image.CacheOptions{
		DigestTTL: opts.DigestCacheTTL, TagTTL: opts.TagCacheTTL, Size: opts.CacheSize, OnLookup: metrics.cacheLookup,
	})
	registryConfig.Subscribe(purgeOnChange(inspector))
	return inspector, nil
}

// purgeOnChange empties the cache when the registry configuration changes:
// a new one can change any answer. The first one has nothing to forget
// (every registry call waits for it); purging then would only keep what
// the calls that began before it fetch out of the cache, and split them
// from the calls after: a second registry request for the same image.
func purgeOnChange(c *image.Cache) func(*registries.Settings) {
	return func(s *registries.Settings) {
		if s.Generation > 1 {
			c.Purge()
		}
	}
}
