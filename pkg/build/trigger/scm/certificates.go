package scm

// CertSecretName is the Secret of the trigger endpoint's serving
// certificate with build-controller --cert-management=internal
// (pkg/webhookcert). No webhook configuration calls the endpoint, so no CA
// is injected anywhere: SCM services reach it through an Ingress or Route
// that trusts or terminates it.
const CertSecretName = "archway-build-triggers-tls" //nolint:gosec // G101: a Secret's name, not a credential.

// The RBAC this code needs is written, each rule with its reason, in
// manifests/build-triggers/rbac/role.yaml
// (TestInstall in test/e2e/install shows each is needed).
