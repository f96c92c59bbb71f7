package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ctrl "sigs.k8s.io/controller-runtime"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/buildconfig"
	"github.com/archway-build/archway/pkg/build/imagestream"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/trigger/aggregated"
	"github.com/archway-build/archway/pkg/build/trigger/binary"
	"github.com/archway-build/archway/pkg/build/trigger/imagechange"
	"github.com/archway-build/archway/pkg/build/trigger/paths"
	"github.com/archway-build/archway/pkg/build/trigger/scm"
	"github.com/archway-build/archway/pkg/placement/image"
	"github.com/archway-build/archway/pkg/registry"
	"github.com/archway-build/archway/pkg/webhookcert"
)

// newStarter is the Starter of a component, counting into the process's
// archway_buildconfig_builds_started_total.
func newStarter(mgr ctrl.Manager) (*instantiate.Starter, error) {
	starter := instantiate.NewStarter(mgr.GetClient(), mgr.GetAPIReader())
	starter.Metrics = instantiate.NewMetrics()
	if err := starter.Metrics.Register(crmetrics.Registry); err != nil {
		return nil, fmt.Errorf("registering the BuildConfig metrics: %w", err)
	}
	return starter, nil
}

// setupBuildConfig adds the BuildConfig controller and the ImageChange
// trigger controller (leader only).
func setupBuildConfig(mgr ctrl.Manager, opts *options) error {
	if err := refuseWhereOpenShiftServesBuilds(mgr); err != nil {
		return err
	}
	starter, err := newStarter(mgr)
	if err != nil {
		return err
	}
	if err := buildconfig.Setup(mgr, starter, buildconfig.Options{}); err != nil {
		return err
	}
	cfg := opts.config
	store, err := opts.registryStore(mgr)
	if err != nil {
		return err
	}
	// The registries as placement and the builds reach them: the watched
	// registry configuration (mirrors, blocked and insecure registries,
	// CAs) and placement's time limit per image.
	po := placementOptions(&cfg.Placement).WithDefaults()
	resolver := image.NewRemote(image.RemoteOptions{
		InsecureRegistries: po.InsecureRegistries,
		Registries:         store,
		Timeout:            po.InspectionTimeout,
		UserAgent:          "archway-build-controller",
	})
	// Image streams are watched where the cluster serves them at start;
	// served later, ImageStreamTag triggers are read at each poll until a
	// restart.
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	streams, err := imagestream.Served(dc)
	if err != nil {
		return err
	}
	return imagechange.Setup(mgr, starter, resolver, imagechange.Options{
		Interval:              cfg.Build.ImageChangeTrigger.PollInterval.Duration,
		BuilderServiceAccount: cfg.Build.BuilderServiceAccount,
		Registry:              crmetrics.Registry,
		WatchImageStreams:     streams,
	})
}

// setupBuildConfigWebhooks serves the SCM webhook triggers and the
// binary-build endpoint (buildconfigs/{name}/instantiatebinary) on every
// replica from the webhook server (--webhook-port, TLS from
// --webhook-cert-dir): under /apis/build.openshift.io/v1/namespaces/ to
// direct callers, and as the aggregated API triggers.archway.dev/v1alpha1
// to the kube-apiserver (package aggregated). It also serves the webhook
// judging Builds' and BuildConfigs' image stream references (package
// imagestream).
func setupBuildConfigWebhooks(mgr ctrl.Manager, _ *options) error {
	if err := refuseWhereOpenShiftServesBuilds(mgr); err != nil {
		return err
	}
	starter, err := newStarter(mgr)
	if err != nil {
		return err
	}
	m := scm.NewMetrics()
	if err := m.Register(crmetrics.Registry); err != nil {
		return fmt.Errorf("registering the webhook metrics: %w", err)
	}
	access := registry.Access{UserAgent: "archway-build-controller"}
	mux := http.NewServeMux()
	mux.Handle(binary.Pattern, &binary.Handler{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Starter: starter, Access: access,
	})
	// BuildConfigs and trigger Secrets are read from informers started
	// with the manager (Secrets trimmed to their WebHookSecretKey, see
	// configureWebhooksCache): an unknown BuildConfig costs what a known
	// one does, and a flood of deliveries costs the apiserver nothing.
	for _, obj := range []client.Object{&buildv1.BuildConfig{}, &corev1.Secret{}} {
		if _, err := mgr.GetCache().GetInformer(context.Background(), obj); err != nil {
			return fmt.Errorf("starting the %T informer: %w", obj, err)
		}
	}
	hooks := scm.NewHandler(mgr.GetClient(), starter, m)
	hooks.Secrets = mgr.GetCache()
	mux.Handle(scm.PathPrefix, hooks)
	mgr.GetWebhookServer().Register(scm.PathPrefix, mux)

	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	authn, err := aggregated.NewAuthentication(context.Background(), cs)
	if err != nil {
		return err
	}
	if err := mgr.Add(authn); err != nil {
		return err
	}
	authz, err := aggregated.NewAuthorizer(cs)
	if err != nil {
		return err
	}
	api := (&aggregated.Server{
		Authentication: authn,
		Authorizer:     authz,
		Binary: &binary.Handler{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Starter: starter, Access: access, Delegated: true,
		},
		Webhooks: http.HandlerFunc(hooks.ServeDelivery),
	}).Handler()
	mgr.GetWebhookServer().Register(aggregated.GroupPrefix, api)
	mgr.GetWebhookServer().Register(aggregated.GroupPrefix+"/", api)
	return imagestream.SetupWebhook(mgr)
}

// requestClientCertificates makes the webhook server ask TLS clients for a
// certificate without requiring one: the kube-apiserver presents its
// front-proxy certificate, which the aggregated API verifies itself
// (package aggregated); SCM services and uploaders present none.
func requestClientCertificates(cfg *tls.Config) {
	cfg.ClientAuth = tls.RequestClientCert
}

// buildConfigWebhooksCertificates are the objects --cert-management=internal
// injects the endpoint's CA into: the aggregated API's APIService and the
// image stream references' webhook configuration.
func buildConfigWebhooksCertificates() []webhookcert.Configuration {
	return []webhookcert.Configuration{
		{Kind: webhookcert.APIService, Name: paths.APIServiceName},
		{Kind: webhookcert.Validating, Name: imagestream.WebhookConfigurationName},
	}
}

// configureWebhooksCache keeps of each cached Secret only a trigger's
// WebHookSecretKey: the webhooks read trigger Secrets from the cache, and
// nothing else reads Secrets from it (the manager's client reads them
// live).
func configureWebhooksCache(o *cache.Options) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&corev1.Secret{}] = cache.ByObject{Transform: scm.TrimSecret}
}
