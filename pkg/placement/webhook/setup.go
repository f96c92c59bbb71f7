package webhook

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
)

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

// gateEventTTL is how long the webhook waits to see a pod it gated
// persisted before it stops expecting it.
const gateEventTTL = time.Minute

// Setup registers the gate webhook at WebhookPath, and the
// validation of PodPlacementConfigs and of the ClusterPodPlacementConfig's
// deletion, on mgr's webhook server. It runs on every replica (no leader election) and reads only the
// manager's informer cache, whose informers it starts up front so that no
// admission ever waits for one; a readiness check named
// "placement-webhook-cache" fails until they have synced. Metrics are
// registered with reg.
func Setup(mgr ctrl.Manager, opts placement.Options, reg prometheus.Registerer) error {
	opts = opts.WithDefaults()
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
		DefaultLabelSelector: placement.GatedSelector(),
		DefaultTransform:     podName,
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(placement.OnEveryReplica{Cache: gated}); err != nil {
		return err
	}
	// The heartbeat lease alone, to gate only while a controller runs.
	key := placement.HeartbeatKey(opts)
	leases, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces:    map[string]cache.Config{key.Namespace: {}},
		DefaultFieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name),
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(placement.OnEveryReplica{Cache: leases}); err != nil {
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
	mgr.GetWebhookServer().Register(placement.WebhookPath, metrics.instrument(&admission.Webhook{Handler: wh}))
	mgr.GetWebhookServer().Register(PodPlacementConfigValidationPath,
		admission.WithValidator[*multiarchv1beta1.PodPlacementConfig](mgr.GetScheme(), podPlacementConfigValidator{
			cache:  mgr.GetCache(),
			claims: placement.PriorityClaims{Client: uncached, Grace: placement.PriorityClaimGrace, Now: time.Now},
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
