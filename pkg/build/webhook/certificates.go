package webhook

// CertSecretName is the Secret of the trigger endpoint's serving
// certificate with build-controller --cert-management=internal
// (pkg/webhookcert). No webhook configuration calls the endpoint, so no CA
// is injected anywhere: SCM services reach it through an Ingress or Route
// that trusts or terminates it.
const CertSecretName = "archway-build-triggers-tls" //nolint:gosec // G101: a Secret's name, not a credential.

// The RBAC of --cert-management=internal: cert-controller watches the
// Secrets of archway's namespace and updates only this one, and
// build-controller reads it at start.
//
// +kubebuilder:rbac:groups="",namespace=archway-system,resources=secrets,verbs=list;watch
// +kubebuilder:rbac:groups="",namespace=archway-system,resources=secrets,verbs=get;update,resourceNames=archway-build-triggers-tls
