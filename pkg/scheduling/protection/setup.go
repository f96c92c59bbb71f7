package protection

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

// The RBAC this code needs is written, each rule with its reason, in
// manifests/scheduling/protection/rbac/role.yaml
// (TestInstall in test/e2e/install shows each is needed).

// ConfigureCache narrows the manager's cache to what the component reads
// beyond the ControlPlaneProtection and the nodes' metadata: its own
// webhook configuration, whose failurePolicy it keeps.
func ConfigureCache(o *cache.Options) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&admissionregistrationv1.ValidatingWebhookConfiguration{}] = cache.ByObject{
		Field: fields.OneTermEqualSelector("metadata.name", WebhookConfigurationName),
	}
}

// Setup registers the webhook at WebhookPath on mgr's webhook server. It
// serves on every replica (no leader election) and reads only the
// manager's informer cache: the ControlPlaneProtection and the nodes'
// metadata, whose informers it starts up front so that no admission waits
// for one and a config change is seen as soon as the watch delivers it. A
// readiness check named "control-plane-protection-cache" fails until they
// have synced. Every replica also keeps the pods webhook's failurePolicy
// in step with the groups' modes (failure_policy.go), writes the status
// with the denials it counted (status.go), and serves ConfigWebhookPath,
// which refuses an override that would not lapse within MaxOverride
// (override.go). The scheme must hold
// schedulingv1alpha1. Metrics are registered with reg. Once mgr has
// stopped, finish writes the denials not yet in the status.
func Setup(mgr ctrl.Manager, reg prometheus.Registerer) (finish func(context.Context) error, err error) {
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("control-plane protection metrics: %w", err)
	}
	ctx := context.Background()
	if _, err := mgr.GetCache().GetInformer(ctx, &schedulingv1alpha1.ControlPlaneProtection{}); err != nil {
		return nil, fmt.Errorf("control-plane protection: informer for ControlPlaneProtection: %w", err)
	}
	if _, err := mgr.GetCache().GetInformer(ctx, &metav1.PartialObjectMetadata{TypeMeta: nodeType}); err != nil {
		return nil, fmt.Errorf("control-plane protection: informer for nodes: %w", err)
	}
	recorder := mgr.GetEventRecorder("control-plane-protection")
	if err := setupFailurePolicy(mgr, recorder); err != nil {
		return nil, fmt.Errorf("control-plane protection: failure policy controller: %w", err)
	}
	denials := newDenialCounter()
	if err := setupStatus(mgr, denials); err != nil {
		return nil, fmt.Errorf("control-plane protection: status controller: %w", err)
	}
	mgr.GetWebhookServer().Register(WebhookPath, &admission.Webhook{Handler: &webhook{
		decoder:  admission.NewDecoder(mgr.GetScheme()),
		cache:    mgr.GetCache(),
		recorder: recorder,
		metrics:  m,
		log:      mgr.GetLogger().WithName("control-plane-protection"),
		denials:  denials,
		rbac:     newRBACAuthorizer(mgr.GetClient()),
	}})
	mgr.GetWebhookServer().Register(ConfigWebhookPath, &admission.Webhook{Handler: &configWebhook{
		decoder: admission.NewDecoder(mgr.GetScheme()),
		now:     time.Now,
	}})
	err = mgr.AddReadyzCheck("control-plane-protection-cache", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("control-plane protection informers have not synced")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	finish = func(ctx context.Context) error {
		return flushDenials(ctx, mgr.GetClient(), mgr.GetAPIReader(), denials)
	}
	return finish, nil
}
