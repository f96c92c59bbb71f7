// Package policy holds the integration tests and the benchmark of
// policy-driven scheduling criteria on the bed: a real kube-apiserver and
// etcd, the real kube-scheduler and kwok nodes of four architectures. The
// scheduling-policy webhooks run in this process behind TLS on loopback and
// are registered with the manifests of manifests/scheduling/policy; every
// case reads the pod as the apiserver stored it. The placement gate webhook
// is served too, for the case that runs placement after a policy.
package policy

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
	"github.com/archway-build/archway/pkg/placement"
	placementwebhook "github.com/archway-build/archway/pkg/placement/webhook"
	"github.com/archway-build/archway/pkg/scheduling/policy"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

// flushInterval is the suite's status flush interval: short, so status
// cases finish quickly, yet long enough that a burst of pods shares a
// write.
const flushInterval = 500 * time.Millisecond

var (
	testBed *bed.Bed
	k8s     client.Client
	scheme  *runtime.Scheme
	// webhookMgr serves the webhooks for the whole suite.
	webhookMgr ctrl.Manager
	// metricsRegistry holds the scheduling-policy webhook's metrics.
	metricsRegistry *prometheus.Registry
)

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Options{
		Name: "scheduling-policy suite",
		// kube-controller-manager makes the pods of the workload cases'
		// Deployments.
		Bed:         bed.Options{ControllerManager: true},
		AddToScheme: []func(*runtime.Scheme) error{kupidv1alpha1.AddToScheme},
		Setup: func(ctx context.Context, s *framework.Suite) (func(), error) {
			testBed, k8s, scheme = s.Bed, s.Client, s.Scheme
			// archway's namespace, as an install makes it: the placement
			// controller's heartbeat Lease lives there.
			if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: placementOptions().Namespace}}); err != nil {
				return nil, err
			}
			stop, err := startWebhook(ctx)
			if err != nil {
				return nil, fmt.Errorf("starting the webhook: %w", err)
			}
			if err := webhooks.Install(); err != nil {
				return stop, fmt.Errorf("registering the webhooks: %w", err)
			}
			return stop, nil
		},
	}))
}

// placementOptions are the placement options of the suite: the bed's
// plain HTTP registry.
func placementOptions() placement.Options {
	o := placement.DefaultOptions()
	o.Namespace = "archway-system"
	o.InsecureRegistries = []string{testBed.Registry.Host}
	return o
}

// webhooks serves the scheduling-policy webhooks and the placement gate
// webhook for the whole suite, registered with the webhook configurations
// of manifests/scheduling/policy and manifests/placement as they are
// (envtest points them at this process with the certificate it made).
var webhooks *bed.Webhooks

// startWebhook serves the webhooks over TLS on loopback; stop ends them
// and waits.
func startWebhook(ctx context.Context) (stop func(), err error) {
	metricsRegistry = prometheus.NewRegistry()
	webhooks, err = testBed.StartWebhooks(ctx, scheme, []string{
		"manifests/scheduling/policy/mutating_webhook_configuration.yaml",
		"manifests/scheduling/policy/validating_webhook_configuration.yaml",
		"manifests/placement/mutating_webhook_configuration.yaml",
	}, func(mgr ctrl.Manager) error {
		if _, err := policy.SetupWebhook(mgr, policy.Options{StatusFlushInterval: flushInterval}, metricsRegistry); err != nil {
			return err
		}
		return placementwebhook.Setup(mgr, placementOptions(), prometheus.NewRegistry())
	})
	if err != nil {
		return nil, err
	}
	webhookMgr = webhooks.Manager
	return webhooks.Stop, nil
}
