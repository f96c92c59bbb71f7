package scm

// CertSecretName is the Secret of the trigger endpoint's serving
// certificate with build-controller --cert-management=internal
// (pkg/webhookcert), which injects its CA into the aggregated API's
// APIService (the kube-apiserver calls the endpoint); SCM services reaching
// the endpoint directly go through an Ingress or Route that trusts or
// terminates it.
const CertSecretName = "archway-build-triggers-tls" //nolint:gosec // G101: a Secret's name, not a credential.

// The RBAC this code needs is written, each rule with its reason, in
// manifests/build-triggers/rbac/role.yaml
// (TestInstall in test/e2e/install shows each is needed).
