// Package protection holds the integration tests and the benchmark of
// control-plane protection on the bed: a real kube-apiserver and etcd, kwok
// nodes of four architectures and the tainted control-plane node
// control-plane-1, and the real kube-scheduler, which this suite starts
// itself under the identity a cluster gives it (system:kube-scheduler, by
// impersonation from the bed's admin), so its bindings reach the webhook
// as they would in a cluster. The webhook runs in this process behind TLS
// on loopback and is registered with the manifest from
// manifests/scheduling/protection; requests are made as different users
// by impersonation.
package protection

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
	"github.com/archway-build/archway/pkg/scheduling/protection"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

const (
	controlPlaneNode = "control-plane-1"
	// schedulerUser is the identity kube-scheduler has in a cluster.
	schedulerUser = "system:kube-scheduler"
)

var (
	testBed *bed.Bed
	k8s     client.Client
	scheme  *runtime.Scheme
	// webhookMgr serves the webhook for the whole suite.
	webhookMgr ctrl.Manager
	// registry holds the webhook's metrics.
	registry *prometheus.Registry
)

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Options{
		Name: "protection suite",
		// The bed's scheduler would run as the bed's admin: this suite runs
		// its own as system:kube-scheduler.
		// Only this suite's CRD: the suite needs no other.
		Bed: bed.Options{
			WithoutScheduler: true, WithoutRegistry: true,
			CRDDirectoryPaths: []string{filepath.Join(bed.RepoRoot(), "manifests", "crd", "bases", "scheduling.archway.dev_controlplaneprotections.yaml")},
		},
		AddToScheme: []func(*runtime.Scheme) error{schedulingv1alpha1.AddToScheme},
		Setup:       setup,
	}))
}

// setup lets the test users in, serves and registers the webhook and starts
// the suite's kube-scheduler; teardown stops the scheduler, then the
// webhook.
func setup(ctx context.Context, s *framework.Suite) (teardown func(), err error) {
	testBed, k8s, scheme = s.Bed, s.Client, s.Scheme
	if err := k8s.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "protection-test-users"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"", "apps", "batch"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
	}); err != nil {
		return nil, fmt.Errorf("the test users' role: %w", err)
	}
	if err := k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "protection-test-users"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "protection-test-users"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: testUsersGroup}},
	}); err != nil {
		return nil, fmt.Errorf("binding the test users: %w", err)
	}
	stopWebhook, err = startWebhook(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting the webhook: %w", err)
	}
	// The teardown stops the webhook serving then: a case may have
	// restarted it.
	stopCurrent := func() { stopWebhook() }
	if err := webhooks.Install(); err != nil {
		return stopCurrent, fmt.Errorf("registering the webhook: %w", err)
	}
	scheduler, err := startComponent(ctx, "kube-scheduler", schedulerUser, nil, schedulerArgs)
	if err != nil {
		return stopCurrent, err
	}
	return func() {
		scheduler.stop()
		stopCurrent()
	}, nil
}

// stopWebhook stops the suite's webhook and finishes it as
// build-controller does.
var stopWebhook func()

// webhooks serves the webhook for the whole suite, registered with the
// webhook configuration of manifests/scheduling/protection as it is
// (envtest points it at this process with the certificate it made).
var webhooks *bed.Webhooks

// startWebhook serves the webhook over TLS on loopback; stop ends it and
// waits.
func startWebhook(ctx context.Context) (stop func(), err error) {
	registry = prometheus.NewRegistry()
	var finish func(context.Context) error
	webhooks, err = testBed.StartWebhooks(ctx, scheme, []string{"manifests/scheduling/protection/validating_webhook_configuration.yaml"},
		func(mgr ctrl.Manager) error {
			var err error
			finish, err = protection.Setup(mgr, registry)
			return err
		})
	if err != nil {
		return nil, err
	}
	webhookMgr = webhooks.Manager
	// As build-controller does once its manager has stopped.
	stopped := webhooks
	return func() {
		stopped.Stop()
		if err := finish(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "protection suite: finishing the webhook:", err)
		}
	}, nil
}

// shippedConfig is the default ControlPlaneProtection of
// manifests/scheduling/protection.
func shippedConfig() (*schedulingv1alpha1.ControlPlaneProtection, error) {
	data, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "manifests", "scheduling", "protection", "control_plane_protection.yaml"))
	if err != nil {
		return nil, err
	}
	cfg := &schedulingv1alpha1.ControlPlaneProtection{}
	return cfg, yaml.UnmarshalStrict(data, cfg)
}
