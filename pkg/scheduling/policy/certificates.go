package policy

import "github.com/archway-build/archway/pkg/webhookcert"

// Webhook TLS: the webhook configurations that call these webhooks and the
// Secret of their serving certificate (manifests/scheduling/policy).
const (
	MutatingWebhookConfigurationName   = "archway-scheduling-policy"
	ValidatingWebhookConfigurationName = "archway-scheduling-policy-validation"
	CertSecretName                     = "archway-scheduling-policy-webhook-tls" //nolint:gosec // G101: a Secret's name, not a credential.
)

// WebhookConfigurations are the configurations build-controller
// --cert-management=internal injects its CA into.
func WebhookConfigurations() []webhookcert.Configuration {
	return []webhookcert.Configuration{
		{Kind: webhookcert.Mutating, Name: MutatingWebhookConfigurationName},
		{Kind: webhookcert.Validating, Name: ValidatingWebhookConfigurationName},
	}
}

// The RBAC this code needs is written, each rule with its reason, in
// manifests/scheduling/policy/rbac/role.yaml
// (TestInstall in test/e2e/install shows each is needed).
