package main

import (
	"cmp"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/archway-build/archway/pkg/build/custombuilds"
	"github.com/archway-build/archway/pkg/webhookcert"
)

// defaultNamespace is archway's namespace, where the custom-builds webhook
// reads its ConfigMap when build-controller runs outside a pod.
const defaultNamespace = "archway-system"

// customBuildsNamespace is where the custom-builds webhook reads the
// ConfigMap of the builder images it admits: the pod's namespace.
func customBuildsNamespace() string { return cmp.Or(ownNamespace(), defaultNamespace) }

// setupCustomBuildsWebhook serves the webhook admitting Custom-strategy
// Builds and BuildConfigs (pkg/build/custombuilds) on every replica. It
// runs beside OpenShift's build API, which build-controller's build
// components refuse, and reads nothing but its ConfigMap.
func setupCustomBuildsWebhook(mgr ctrl.Manager, _ *options) error {
	return custombuilds.Setup(mgr, customBuildsNamespace())
}

func configureCustomBuildsCache(o *cache.Options) {
	custombuilds.ConfigureCache(o, customBuildsNamespace())
}

// customBuildsWebhookConfigurations are what --cert-management=internal
// injects the CA into.
func customBuildsWebhookConfigurations() []webhookcert.Configuration {
	return []webhookcert.Configuration{{Kind: webhookcert.Validating, Name: custombuilds.WebhookConfigurationName}}
}
