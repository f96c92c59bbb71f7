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
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
	"github.com/archway-build/archway/pkg/scheduling/protection"
	"github.com/archway-build/archway/test/bed"
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
	registry   *prometheus.Registry
	webhookURL string
	webhookCA  []byte
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	ctx := context.Background()
	var err error
	// The bed's scheduler would run as the bed's admin: this suite runs
	// its own as system:kube-scheduler.
	// Only this suite's CRD: the suite needs no other.
	testBed, err = bed.Start(ctx, bed.Options{
		WithoutScheduler: true, WithoutRegistry: true,
		CRDDirectoryPaths: []string{filepath.Join(bed.RepoRoot(), "manifests", "crd", "bases", "scheduling.archway.dev_controlplaneprotections.yaml")},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = testBed.Stop() }()
	scheme = bed.NewScheme()
	utilruntime.Must(schedulingv1alpha1.AddToScheme(scheme))
	if k8s, err = client.New(testBed.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stopWebhook, err := startWebhook(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "protection suite: starting the webhook:", err)
		return 1
	}
	// Before the bed goes with the webhook's certificates.
	defer stopWebhook()
	if err := registerWebhook(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "protection suite: registering the webhook:", err)
		return 1
	}
	scheduler, err := startComponent(ctx, "kube-scheduler", schedulerUser, nil, schedulerArgs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "protection suite:", err)
		return 1
	}
	defer scheduler.stop()
	return m.Run()
}

// zapLevel logs errors only, unless ARCHWAY_TEST_VERBOSE is set.
func zapLevel() zapcore.Level {
	if os.Getenv("ARCHWAY_TEST_VERBOSE") != "" {
		return zapcore.Level(-2)
	}
	return zapcore.ErrorLevel
}

// startWebhook serves the webhook over TLS on loopback with a certificate
// made for the run; stop ends it and waits.
func startWebhook(ctx context.Context) (stop func(), err error) {
	dir, err := os.MkdirTemp(testBed.Dir, "webhook-certs-")
	if err != nil {
		return nil, err
	}
	if webhookCA, err = writeServingCert(dir); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	webhookMgr, err = ctrl.NewManager(testBed.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir}),
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	registry = prometheus.NewRegistry()
	if err := protection.Setup(webhookMgr, registry); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := webhookMgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "webhook manager:", err)
		}
	}()
	stop = func() { cancel(); <-done }
	webhookURL = fmt.Sprintf("https://127.0.0.1:%d%s", port, protection.WebhookPath)
	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
	defer cancelSync()
	if !webhookMgr.GetCache().WaitForCacheSync(syncCtx) {
		stop()
		return nil, fmt.Errorf("the webhook's informers did not sync")
	}
	if err := waitServing(syncCtx, webhookURL, webhookCA); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// registerWebhook creates the webhook configuration of
// manifests/scheduling/protection, pointed at this process.
func registerWebhook(ctx context.Context) error {
	vwc, err := manifestWebhookConfiguration()
	if err != nil {
		return err
	}
	vwc.Annotations = nil
	base := strings.TrimSuffix(webhookURL, protection.WebhookPath)
	for i := range vwc.Webhooks {
		url := base + *vwc.Webhooks[i].ClientConfig.Service.Path
		vwc.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: webhookCA}
	}
	return k8s.Create(ctx, vwc)
}

func manifestWebhookConfiguration() (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	data, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "manifests", "scheduling", "protection", "validating_webhook_configuration.yaml"))
	if err != nil {
		return nil, err
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	return vwc, yaml.UnmarshalStrict(data, vwc)
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
