// Package paths names the URLs of build-triggers' endpoints, shared by the
// servers (pkg/build/trigger/...) and the plugin, which must not link them.
//
// build-triggers serves binary builds and SCM webhooks at two places:
//
//   - its aggregated API, group triggers.archway.dev version v1alpha1, which
//     the kube-apiserver proxies to (an APIService): users reach it at the
//     cluster's API address with whatever credentials kubectl uses, and the
//     apiserver passes their identity on;
//   - OpenShift's paths under /apis/build.openshift.io/v1, served directly
//     to whoever reaches the build-triggers Service (an Ingress or Route),
//     authenticated by a bearer token.
//
// The resource and subresource names are OpenShift's on both.
package paths

import "net/url"

// The aggregated API.
const (
	// Group is the API group build-triggers serves through the apiserver.
	Group = "triggers.archway.dev"
	// Version is its only version.
	Version = "v1alpha1"
	// APIServiceName is the name of its APIService.
	APIServiceName = Version + "." + Group
)

// The resource and subresources, as OpenShift names them.
const (
	// Resource is the resource whose subresources are served.
	Resource = "buildconfigs"
	// InstantiateBinary is the subresource of binary builds (create).
	InstantiateBinary = "instantiatebinary"
	// Webhooks is the subresource of SCM webhook deliveries (create).
	Webhooks = "webhooks"
)

// OpenShiftPrefix is the root of OpenShift's paths, served directly.
const OpenShiftPrefix = "/apis/build.openshift.io/v1"

// AggregatedPrefix is the root of the aggregated API's paths.
const AggregatedPrefix = "/apis/" + Group + "/" + Version

// BuildConfig is the path of a BuildConfig under prefix (OpenShiftPrefix or
// AggregatedPrefix), names escaped.
func BuildConfig(prefix, namespace, name string) string {
	return prefix + "/namespaces/" + url.PathEscape(namespace) + "/" + Resource + "/" + url.PathEscape(name)
}

// Binary is the path binary builds of the BuildConfig are uploaded to.
func Binary(prefix, namespace, name string) string {
	return BuildConfig(prefix, namespace, name) + "/" + InstantiateBinary
}

// Webhook is the path of a webhook delivery of type typ (github, gitlab,
// bitbucket, generic) with secret, which is put in as it is (the plugin
// prints a placeholder).
func Webhook(prefix, namespace, name, secret, typ string) string {
	return BuildConfig(prefix, namespace, name) + "/" + Webhooks + "/" + secret + "/" + typ
}

// BinaryPattern is the http.ServeMux pattern of binary uploads under
// prefix; the handlers read the path values ns and name (and, of
// webhooks, secret and type).
func BinaryPattern(prefix string) string {
	return prefix + "/namespaces/{ns}/" + Resource + "/{name}/" + InstantiateBinary
}

// WebhookPattern is the pattern of webhook deliveries under prefix.
func WebhookPattern(prefix string) string {
	return prefix + "/namespaces/{ns}/" + Resource + "/{name}/" + Webhooks + "/{secret}/{type}"
}
