package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
	multiarchv1alpha1 "github.com/archway-build/archway/pkg/apis/multiarch/v1alpha1"
	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
	"github.com/archway-build/archway/pkg/eventrecorder"
)

// leaderElectionID is the default name of the Lease the replicas of
// build-controller elect their leader with (--leader-election-id).
const leaderElectionID = "build-controller.archway.dev"

// newScheme holds every type the components read or write.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(buildv1.AddToScheme(s))
	utilruntime.Must(multiarchv1beta1.AddToScheme(s))
	utilruntime.Must(multiarchv1alpha1.AddToScheme(s))
	utilruntime.Must(kupidv1alpha1.AddToScheme(s))
	utilruntime.Must(schedulingv1alpha1.AddToScheme(s))
	return s
}

// loadConfig reads --config, or makes the all-defaults configuration when
// no file is given (components that need a setting say so when they start).
func loadConfig(path string) (*configv1alpha1.BuildControllerConfiguration, error) {
	if path == "" {
		cfg := &configv1alpha1.BuildControllerConfiguration{}
		cfg.APIVersion, cfg.Kind = configv1alpha1.GroupVersion.String(), configv1alpha1.Kind
		configv1alpha1.SetDefaults(cfg)
		return cfg, nil
	}
	return configv1alpha1.Load(path)
}

// runManager starts a controller-runtime manager with the enabled
// components: leader election for the controllers (webhooks serve on every
// replica), health and readiness probes, the metrics endpoint and the
// webhook server. It returns when ctx ends or the manager fails.
func runManager(ctx context.Context, opts *options, enabled []component) error {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, err := loadConfig(opts.configFile)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	opts.config = cfg
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("connecting to the apiserver: %w", err)
	}
	if opts.kubeAPIQPS > 0 {
		restConfig.QPS, restConfig.Burst = opts.kubeAPIQPS, max(opts.kubeAPIBurst, int(opts.kubeAPIQPS))
	}
	restConfig.UserAgent = "build-controller"
	if err := checkMetricsConfig(opts); err != nil {
		return err
	}
	logMetricsServing(opts)
	leNamespace := opts.leaderElectNamespace
	if leNamespace == "" && opts.leaderElect {
		leNamespace = podNamespace()
	}
	certs, err := webhookCerts(opts, enabled)
	if err != nil {
		return err
	}
	webhookOpts := webhook.Options{Host: opts.webhookHost, Port: opts.webhookPort, CertDir: opts.webhookCertDir}
	if certs != nil {
		webhookOpts.TLSOpts = []func(*tls.Config){certs.TLSOption}
	}
	for _, c := range enabled {
		if c.tls != nil {
			webhookOpts.TLSOpts = append(webhookOpts.TLSOpts, c.tls)
		}
	}
	var cacheOpts cache.Options
	for _, c := range enabled {
		if c.cache != nil {
			c.cache(&cacheOpts)
		}
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:  newScheme(),
		Cache:   cacheOpts,
		Metrics: metricsOptions(opts),
		// Secrets are read from the apiserver one by one: the manager's
		// client never starts an informer over every Secret of the cluster.
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		HealthProbeBindAddress:        opts.probeAddr,
		PprofBindAddress:              opts.pprofAddr,
		LeaderElection:                opts.leaderElect,
		LeaderElectionID:              opts.leaderElectID,
		LeaderElectionNamespace:       leNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.leaderElection.leaseDuration,
		RenewDeadline:                 &opts.leaderElection.renewDeadline,
		RetryPeriod:                   &opts.leaderElection.retryPeriod,
		WebhookServer:                 webhook.NewServer(webhookOpts),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	events, err := eventrecorder.New(restConfig, mgr.GetScheme(), ctrl.Log.WithName("events"), eventrecorder.Options{})
	if err != nil {
		return err
	}
	mgr = eventsManager{Manager: mgr, events: events}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	log := ctrl.Log.WithName("setup")
	if certs != nil {
		if err := certs.CheckSecret(ctx, mgr.GetAPIReader()); err != nil {
			return fmt.Errorf("--cert-management=internal: %w", err)
		}
		if err := certs.Setup(mgr); err != nil {
			return err
		}
		// Not ready until the certificate is served and its CA injected.
		if err := mgr.AddReadyzCheck("webhook-certs", certs.ReadyCheck); err != nil {
			return err
		}
	}
	for _, c := range enabled {
		if err := c.setup(mgr, opts); err != nil {
			return fmt.Errorf("component %s: %w", c.name, err)
		}
		log.Info("component enabled", "component", c.name)
	}
	// SIGTERM stops the manager gracefully: it releases the lease so
	// another replica takes over at its next retry.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = mgr.Start(ctx)
	// The controllers and webhooks have stopped and the election lease is
	// free: the components finish (placement waits for the next leader).
	for _, f := range opts.afterStop {
		if ferr := f(context.WithoutCancel(ctx)); ferr != nil {
			log.Error(ferr, "finishing after the manager stopped")
		}
	}
	// Write the events they recorded before the process exits.
	flushCtx, cancel := context.WithTimeout(context.Background(), eventFlushTimeout)
	defer cancel()
	if ferr := events.Shutdown(flushCtx); ferr != nil {
		log.Error(ferr, "not every event reached the apiserver")
	}
	return err
}

// eventFlushTimeout bounds the wait for recorded events at exit.
const eventFlushTimeout = 20 * time.Second

// eventsManager is a manager whose event recorders write through a queue
// runManager drains after the manager stops (controller-runtime's own
// cancels the writes under way when it stops).
type eventsManager struct {
	ctrl.Manager
	events *eventrecorder.Provider
}

func (m eventsManager) GetEventRecorder(name string) recorder.EventRecorder {
	return m.events.Recorder(name)
}

// ownNamespace is the namespace of build-controller's pod: $POD_NAMESPACE
// (the manifests set it from the downward API), else the service
// account's, else "" outside a pod.
func ownNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	return podNamespace()
}

// podNamespace is the namespace the process runs in, from the service
// account mount (empty outside a pod: leader election then needs
// --leader-election-namespace or --leader-elect=false).
func podNamespace() string {
	data, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return string(data)
}
