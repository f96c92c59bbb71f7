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

// The RBAC of --cert-management=internal (pkg/webhookcert): cert-controller
// watches the webhook configurations (a watch cannot name one) and the
// Secrets of archway's namespace, updates only this component's own, and
// build-controller reads its Secret at start.
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;update,resourceNames=archway-scheduling-policy
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;update,resourceNames=archway-scheduling-policy-validation
// +kubebuilder:rbac:groups="",namespace=archway-system,resources=secrets,verbs=list;watch
// +kubebuilder:rbac:groups="",namespace=archway-system,resources=secrets,verbs=get;update,resourceNames=archway-scheduling-policy-webhook-tls
