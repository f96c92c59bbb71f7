package protection

import "github.com/archway-build/archway/pkg/webhookcert"

// Webhook TLS: the webhook configuration that calls this webhook and the
// Secret of its serving certificate (manifests/scheduling/protection).
const (
	WebhookConfigurationName = "archway-control-plane-protection"
	CertSecretName           = "archway-control-plane-protection-webhook-tls"
)

// WebhookConfigurations are the configurations build-controller
// --cert-management=internal injects its CA into.
func WebhookConfigurations() []webhookcert.Configuration {
	return []webhookcert.Configuration{{Kind: webhookcert.Validating, Name: WebhookConfigurationName}}
}

// The RBAC this code needs is written, each rule with its reason, in
// manifests/scheduling/protection/rbac/role.yaml
// (TestInstall in test/e2e/install shows each is needed).
