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

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/scheduling/policy"
	"github.com/archway-build/archway/test/bed"
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
	webhookURL string // the server's base URL
	webhookCA  []byte
	// metricsRegistry holds the scheduling-policy webhook's metrics.
	metricsRegistry *prometheus.Registry
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	ctx := context.Background()
	var err error
	testBed, err = bed.Start(ctx, bed.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = testBed.Stop() }()
	scheme = bed.NewScheme()
	utilruntime.Must(kupidv1alpha1.AddToScheme(scheme))
	if k8s, err = client.New(testBed.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop, err := startWebhook(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduling-policy suite: starting the webhook:", err)
		return 1
	}
	// Before the bed goes with the webhook's certificates.
	defer stop()
	if err := registerWebhooks(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "scheduling-policy suite: registering the webhooks:", err)
		return 1
	}
	return m.Run()
}

// zapLevel logs errors only, unless ARCHWAY_TEST_VERBOSE is set.
func zapLevel() zapcore.Level {
	if os.Getenv("ARCHWAY_TEST_VERBOSE") != "" {
		return zapcore.Level(-2)
	}
	return zapcore.ErrorLevel
}

// placementOptions are the placement options of the suite: the bed's
// plain HTTP registry.
func placementOptions() placement.Options {
	o := placement.DefaultOptions()
	o.Namespace = "archway-system"
	o.InsecureRegistries = []string{testBed.Registry.Host}
	return o
}

// startWebhook serves the scheduling-policy webhooks and the placement
// gate webhook over TLS on loopback with a certificate made for the run;
// stop ends it and waits.
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
	metricsRegistry = prometheus.NewRegistry()
	if _, err := policy.SetupWebhook(webhookMgr, policy.Options{StatusFlushInterval: flushInterval}, metricsRegistry); err != nil {
		return nil, err
	}
	if err := placement.SetupWebhook(webhookMgr, placementOptions(), prometheus.NewRegistry()); err != nil {
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
	webhookURL = fmt.Sprintf("https://127.0.0.1:%d", port)
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

// registerWebhooks creates the webhook configurations of
// manifests/scheduling/policy and the gate webhook of manifests/placement,
// pointed at this process.
func registerWebhooks(ctx context.Context) error {
	root := bed.RepoRoot()
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := readManifest(filepath.Join(root, "manifests", "scheduling", "policy", "mutating_webhook_configuration.yaml"), mwc); err != nil {
		return err
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := readManifest(filepath.Join(root, "manifests", "scheduling", "policy", "validating_webhook_configuration.yaml"), vwc); err != nil {
		return err
	}
	gate := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := readManifest(filepath.Join(root, "manifests", "placement", "mutating_webhook_configuration.yaml"), gate); err != nil {
		return err
	}
	for _, w := range []*admissionregistrationv1.MutatingWebhook{&mwc.Webhooks[0], &gate.Webhooks[0]} {
		w.ClientConfig = clientConfig(*w.ClientConfig.Service.Path)
	}
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig = clientConfig(*vwc.Webhooks[i].ClientConfig.Service.Path)
	}
	for _, obj := range []client.Object{mwc, vwc, gate} {
		obj.SetAnnotations(nil)
		if err := k8s.Create(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

func clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	url := strings.TrimSuffix(webhookURL, "/") + path
	return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: webhookCA}
}

func readManifest(path string, obj any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return yaml.UnmarshalStrict(data, obj)
}
