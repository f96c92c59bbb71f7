package placement

import "github.com/archway-build/archway/pkg/webhookcert"

// Webhook TLS: the webhook configurations that call the placement webhooks
// and the Secret of their serving certificate (manifests/placement).
const (
	MutatingWebhookConfigurationName   = "archway-pod-placement"
	ValidatingWebhookConfigurationName = "archway-pod-placement-validation"
	CertSecretName                     = "archway-placement-webhook-tls"
)

// WebhookConfigurations are the configurations build-controller
// --cert-management=internal injects its CA into.
func WebhookConfigurations() []webhookcert.Configuration {
	return []webhookcert.Configuration{
		{Kind: webhookcert.Mutating, Name: MutatingWebhookConfigurationName},
		{Kind: webhookcert.Validating, Name: ValidatingWebhookConfigurationName},
	}
}

// The RBAC of --cert-management=internal is in the hand-written
// manifests/placement/rbac/webhook_role.yaml.
