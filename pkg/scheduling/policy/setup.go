package policy

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

// The RBAC this code needs is written, each rule with its reason, in
// manifests/scheduling/policy/rbac/role.yaml
// (TestInstall in test/e2e/install shows each is needed).

// DefaultStatusFlushInterval is how often each replica adds what it counted
// to the policies' status: at most one write per policy per interval.
const DefaultStatusFlushInterval = 10 * time.Second

// Options configure the scheduling-policy webhook.
type Options struct {
	// StatusFlushInterval is how often the counts are written to the
	// policies' status; zero means DefaultStatusFlushInterval.
	StatusFlushInterval time.Duration
}

// SetupWebhook registers the pod webhook at WebhookPath, the workload
// template webhook at WorkloadWebhookPath, the skipped-parts webhook at
// SkippedWebhookPath and the policy validation webhooks on mgr's webhook
// server, and adds the status recorder to mgr. It runs on every replica (no leader election) and reads
// the manager's informer cache, whose informers it starts up front so that
// no admission waits for one; a readiness check named
// "scheduling-policy-webhook-cache" fails until they have synced. Metrics
// are registered with reg. It returns the status recorder.
func SetupWebhook(mgr ctrl.Manager, opts Options, reg prometheus.Registerer) (*StatusRecorder, error) {
	if opts.StatusFlushInterval <= 0 {
		opts.StatusFlushInterval = DefaultStatusFlushInterval
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("scheduling-policy webhook metrics: %w", err)
	}
	for _, obj := range []client.Object{&kupidv1alpha1.PodSchedulingPolicy{}, &kupidv1alpha1.ClusterPodSchedulingPolicy{}, &corev1.Namespace{}} {
		if _, err := mgr.GetCache().GetInformer(context.Background(), obj); err != nil {
			return nil, fmt.Errorf("scheduling-policy webhook: informer for %T: %w", obj, err)
		}
	}
	log := mgr.GetLogger().WithName("scheduling-policy-webhook")
	status := NewStatusRecorder(mgr.GetCache(), mgr.GetClient(), opts.StatusFlushInterval, m.writes, log)
	SetDirectReader(status, mgr.GetAPIReader())
	if err := mgr.Add(status); err != nil {
		return nil, err
	}
	srv := mgr.GetWebhookServer()
	policies := policyReader{cache: mgr.GetCache(), apiReader: mgr.GetAPIReader()}
	srv.Register(WebhookPath, &admission.Webhook{Handler: &podWebhook{
		decoder:  admission.NewDecoder(mgr.GetScheme()),
		policies: policies,
		status:   status,
		metrics:  m,
		log:      log,
		now:      time.Now,
	}})
	srv.Register(WorkloadWebhookPath, &admission.Webhook{Handler: &workloadWebhook{
		decoder:  admission.NewDecoder(mgr.GetScheme()),
		policies: policies,
		metrics:  m,
		log:      log.WithName("workloads"),
	}})
	srv.Register(SkippedWebhookPath, &admission.Webhook{Handler: &skippedWebhook{
		decoder:  admission.NewDecoder(mgr.GetScheme()),
		policies: policies,
		status:   status,
		recorder: mgr.GetEventRecorder("scheduling-policy-webhook"),
		metrics:  m,
		log:      log.WithName("skipped"),
		now:      time.Now,
	}})
	srv.Register(PodSchedulingPolicyValidationPath, admission.WithValidator[*kupidv1alpha1.PodSchedulingPolicy](mgr.GetScheme(),
		policyValidator[*kupidv1alpha1.PodSchedulingPolicy]{validate: validatePodPolicy}))
	srv.Register(ClusterPodSchedulingPolicyValidationPath, admission.WithValidator[*kupidv1alpha1.ClusterPodSchedulingPolicy](mgr.GetScheme(),
		policyValidator[*kupidv1alpha1.ClusterPodSchedulingPolicy]{validate: validateClusterPolicy}))
	return status, mgr.AddReadyzCheck("scheduling-policy-webhook-cache", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 100*time.Millisecond)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return fmt.Errorf("scheduling-policy webhook informers have not synced")
		}
		return nil
	})
}
