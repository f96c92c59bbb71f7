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

// The RBAC of --cert-management=internal (pkg/webhookcert): cert-controller
// watches the webhook configurations (a watch cannot name one) and the
// Secrets of archway's namespace, updates only this component's own, and
// build-controller reads its Secret at start.
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;update,resourceNames=archway-control-plane-protection
// +kubebuilder:rbac:groups="",namespace=archway-system,resources=secrets,verbs=list;watch
// +kubebuilder:rbac:groups="",namespace=archway-system,resources=secrets,verbs=get;update,resourceNames=archway-control-plane-protection-webhook-tls
