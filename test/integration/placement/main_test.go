// Package placement holds the integration tests and benchmarks of
// arch-aware pod placement on the bed: a real kube-apiserver and etcd, the
// real kube-scheduler, kwok nodes of four architectures, and real
// registries (one plain, one with htpasswd auth) holding images the suite
// pushes. The gate webhook runs in this process behind TLS on loopback and
// is registered with the manifest from manifests/placement; the controllers
// run in a manager of their own, so a case can stop and restart them.
// Every case asserts where the real scheduler binds pods.
package placement

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	multiarchv1alpha1 "github.com/archway-build/archway/pkg/apis/multiarch/v1alpha1"
	"github.com/archway-build/archway/pkg/eventrecorder"
	"github.com/archway-build/archway/pkg/placement"
	placementconfig "github.com/archway-build/archway/pkg/placement/config"
	placementconversion "github.com/archway-build/archway/pkg/placement/conversion"
	"github.com/archway-build/archway/pkg/placement/podcontroller"
	placementwebhook "github.com/archway-build/archway/pkg/placement/webhook"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

// Images the suite pushes (full references, set by TestMain).
var (
	imgAMD64Only  string // a single image, linux/amd64 (no index)
	imgARM64S390X string // an index: linux/arm64, linux/s390x and an attestation
	imgAll        string // an index of all four architectures
	imgWinARM64   string // an index: windows/amd64 and linux/arm64
	imgPrivate    string // in the htpasswd registry only: linux/arm64
	imgPPC64LE    string // a single image, linux/ppc64le
)

// globalPullSecret is the secret the suite's controller uses as the global
// pull secret; a case creates it when it needs it.
var globalPullSecret = types.NamespacedName{Namespace: "placement-global", Name: "global-pull-secret"}

var (
	testBed *bed.Bed
	k8s     client.Client
	scheme  *runtime.Scheme
	// webhookMgr serves the gate webhook for the whole suite.
	webhookMgr ctrl.Manager
	webhookURL string
	webhookCA  []byte
	// suiteController is the running controller; a case may replace it.
	suiteController *controllerRun
	// webhookRegistry holds the gate webhook's metrics.
	webhookRegistry = prometheus.NewRegistry()
)

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Options{
		Name: "placement suite",
		Bed:  bed.Options{AuthRegistry: true},
		// MTO's first version of ClusterPodPlacementConfig, which the
		// suite's webhook server converts (conversion_test.go).
		AddToScheme: []func(*runtime.Scheme) error{multiarchv1alpha1.AddToScheme},
		Setup: func(ctx context.Context, s *framework.Suite) (func(), error) {
			testBed, k8s, scheme = s.Bed, s.Client, s.Scheme
			stopWebhook, err := setup(ctx)
			return func() {
				suiteController.stop()
				stopWebhook()
			}, err
		},
	}))
}

// setup pushes the suite's images, starts and registers the webhook and
// starts the controller; the webhook serves until stopWebhook.
func setup(ctx context.Context) (stopWebhook func(), err error) {
	stopWebhook = func() {}
	if err := pushSuiteImages(ctx); err != nil {
		return stopWebhook, fmt.Errorf("pushing images: %w", err)
	}
	if err := ensureNamespace(ctx, suiteOptions().Namespace); err != nil {
		return stopWebhook, err
	}
	if stopWebhook, err = startWebhook(ctx); err != nil {
		return func() {}, fmt.Errorf("starting the webhook: %w", err)
	}
	if err := webhooks.Install(); err != nil {
		return stopWebhook, fmt.Errorf("registering the webhook: %w", err)
	}
	if err := enableConversion(ctx); err != nil {
		return stopWebhook, err
	}
	// Before the controller, which discovers OpenShift's registry settings
	// once, at start.
	if err := testBed.InstallOpenShiftRegistryCRDs(); err != nil {
		return stopWebhook, err
	}
	suiteController, err = startController(suiteOptions())
	if err != nil {
		return stopWebhook, fmt.Errorf("starting the controller: %w", err)
	}
	return stopWebhook, nil
}

func pushSuiteImages(ctx context.Context) error {
	plain, private := newPusher(testBed.Registry), newPusher(testBed.AuthRegistry)
	var err error
	steps := []func() error{
		func() error {
			imgAMD64Only, err = plain.pushSingle(ctx, "placement/amd64-only", "1", platform{"linux", "amd64"})
			return err
		},
		func() error {
			imgARM64S390X, err = plain.pushIndex(ctx, "placement/arm64-s390x", "1", append(linux("arm64", "s390x"), platform{"unknown", "unknown"})...)
			return err
		},
		func() error {
			imgAll, err = plain.pushIndex(ctx, "placement/all", "1", linux("amd64", "arm64", "ppc64le", "s390x")...)
			return err
		},
		func() error {
			imgWinARM64, err = plain.pushIndex(ctx, "placement/win-arm64", "1", platform{"windows", "amd64"}, platform{"linux", "arm64"})
			return err
		},
		func() error {
			imgPPC64LE, err = plain.pushSingle(ctx, "placement/ppc64le-only", "1", platform{"linux", "ppc64le"})
			return err
		},
		func() error {
			imgPrivate, err = private.pushIndex(ctx, "placement/private", "1", linux("arm64")...)
			return err
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// suiteOptions are the controller options of the suite: the bed's plain
// HTTP registries, and retries fast enough for tests (3 tries 100 ms, 200
// ms apart).
func suiteOptions() placement.Options {
	o := placement.DefaultOptions()
	o.Namespace = "archway-system"
	o.GlobalPullSecret = globalPullSecret
	o.InsecureRegistries = []string{testBed.Registry.Host, testBed.AuthRegistry.Host}
	o.InspectionTries = 3
	o.InspectionBackoff = 100 * time.Millisecond
	o.InspectionMaxBackoff = time.Second
	o.InspectionDeadline = 30 * time.Second
	o.InspectionTimeout = 5 * time.Second
	o.GateSweepInterval = time.Second
	// The suite's controller has no standby: stopped, it waits this long
	// for one before it releases what is gated.
	o.HandoverTimeout = 2 * time.Second
	return o
}

// webhooks serves the gate webhook for the whole suite, registered with
// the webhook configurations of manifests/placement as they are (envtest
// points them at this process with the certificate it made).
var webhooks *bed.Webhooks

// startWebhook serves the gate webhook over TLS on loopback; stop ends it,
// waits, and removes the certificate.
func startWebhook(ctx context.Context) (stop func(), err error) {
	webhooks, err = testBed.StartWebhooks(ctx, scheme, []string{
		"manifests/placement/mutating_webhook_configuration.yaml",
		"manifests/placement/validating_webhook_configuration.yaml",
	}, func(mgr ctrl.Manager) error {
		if err := placementconversion.Setup(mgr, nil); err != nil {
			return err
		}
		return placementwebhook.Setup(mgr, suiteOptions(), webhookRegistry)
	})
	if err != nil {
		return nil, err
	}
	webhookMgr, webhookURL, webhookCA = webhooks.Manager, webhooks.URL+placement.WebhookPath, webhooks.CA
	return webhooks.Stop, nil
}

// controllerRun is a running manager with the placement controllers.
type controllerRun struct {
	mgr        ctrl.Manager
	controller *placementconfig.Controller
	events     *eventrecorder.Provider
	registry   *prometheus.Registry
	cancel     context.CancelFunc
	done       chan error
}

// eventsManager is a manager whose event recorders outlive it.
type eventsManager struct {
	ctrl.Manager
	events *eventrecorder.Provider
}

func (m eventsManager) GetEventRecorder(name string) recorder.EventRecorder {
	return m.events.Recorder(name)
}

// startController starts the pod placement and config controllers in a
// manager of their own, with leader election, as build-controller runs
// them.
func startController(opts placement.Options) (*controllerRun, error) {
	mgr, err := ctrl.NewManager(testBed.Config, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		LeaderElection:                true,
		LeaderElectionID:              "placement-suite",
		LeaderElectionNamespace:       "default",
		LeaderElectionReleaseOnCancel: true,
		Controller:                    config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	// Events through a queue drained after Finish, as build-controller
	// does: a controller that finds no successor releases pods after its
	// manager (and controller-runtime's recorder) stopped.
	events, err := eventrecorder.New(testBed.Config, scheme, ctrl.Log.WithName("events"), eventrecorder.Options{})
	if err != nil {
		return nil, err
	}
	r := &controllerRun{mgr: mgr, registry: prometheus.NewRegistry(), done: make(chan error, 1), events: events}
	withEvents := eventsManager{Manager: mgr, events: events}
	pods, err := podcontroller.Setup(withEvents, opts, r.registry)
	if err != nil {
		return nil, err
	}
	if r.controller, err = placementconfig.Setup(withEvents, opts, pods); err != nil {
		return nil, err
	}
	var ctx context.Context
	ctx, r.cancel = context.WithCancel(context.Background())
	go func() { r.done <- mgr.Start(ctx) }()
	select {
	case <-mgr.Elected():
		return r, nil
	case err := <-r.done:
		return nil, fmt.Errorf("the controller manager stopped: %w", err)
	case <-time.After(60 * time.Second):
		r.stop()
		return nil, fmt.Errorf("the controller manager was not elected in time")
	}
}

// stop stops the manager and waits for it.
func (r *controllerRun) stop() {
	if r == nil || r.cancel == nil {
		return
	}
	r.cancel()
	if err := <-r.done; err != nil {
		fmt.Fprintln(os.Stderr, "controller manager:", err)
	}
	if err := r.controller.Finish(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "placement controller:", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.events.Shutdown(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "placement events:", err)
	}
	r.cancel = nil
}
