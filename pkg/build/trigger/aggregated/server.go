// Package aggregated serves build-triggers' aggregated API,
// triggers.archway.dev/v1alpha1 (package paths), to which the kube-apiserver
// proxies through an APIService:
//
//	POST /apis/triggers.archway.dev/v1alpha1/namespaces/{ns}/buildconfigs/{name}/instantiatebinary
//	POST /apis/triggers.archway.dev/v1alpha1/namespaces/{ns}/buildconfigs/{name}/webhooks/{secret}/{type}
//
// plus the discovery of the group and version (which makes the APIService
// Available). Users reach them at the cluster's API address with any
// credentials the apiserver accepts (client certificates, tokens, OIDC):
// the apiserver authenticates them, authorizes them with RBAC on the
// subresource, and proxies with the user in front-proxy headers over its
// front-proxy client certificate.
//
// Nothing the apiserver did is taken on trust. Every request is
// authenticated again (Authentication: only a peer holding a front-proxy
// certificate is believed about who the user is; anything else is 401) and
// every subresource request is authorized again for that user with a
// SubjectAccessReview of the same attributes (create on
// buildconfigs/instantiatebinary or buildconfigs/webhooks in
// triggers.archway.dev, in the namespace, for the BuildConfig): 403
// otherwise, before any handler runs.
//
// Why these names: the resource and subresources are OpenShift's, so roles
// read as they do there; the group is archway's own because the apiserver
// authorizes the group of the URL, and build.openshift.io's paths belong
// to the CRDs (an aggregated API cannot serve a subresource of a CRD's
// group).
package aggregated

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/archway-build/archway/pkg/build/trigger/paths"
	"github.com/archway-build/archway/pkg/build/trigger/scm"
)

// GroupVersion is the aggregated API's.
var GroupVersion = schema.GroupVersion{Group: paths.Group, Version: paths.Version}

// Server is the aggregated API.
type Server struct {
	// Authentication authenticates every request (front proxy only).
	Authentication *Authentication
	// Authorizer authorizes every subresource request.
	Authorizer authorizer.UnconditionalAuthorizer
	// Binary serves uploads (path values ns and name): a binary.Handler
	// with Delegated set.
	Binary http.Handler
	// Webhooks serves deliveries (path values ns, name, secret and type):
	// scm.Handler's ServeDelivery.
	Webhooks http.Handler
}

// Handler is the server's HTTP handler: mount it at GroupPrefix.
func (s *Server) Handler() http.Handler {
	codecs := newCodecs()
	subresources := http.NewServeMux()
	subresources.Handle(paths.BinaryPattern(paths.AggregatedPrefix), s.Binary)
	subresources.Handle(paths.WebhookPattern(paths.AggregatedPrefix), withRelayedClientAddress(s.Webhooks))

	mux := http.NewServeMux()
	// Discovery needs authentication (only the apiserver reaches it) but
	// no right: it says what every apiserver's discovery says.
	mux.HandleFunc("GET "+GroupPrefix, serveGroup)
	mux.HandleFunc("GET "+paths.AggregatedPrefix, serveResources)
	mux.Handle(paths.AggregatedPrefix+"/", filters.WithAuthorization(subresources, s.Authorizer, codecs))

	h := filters.WithAuthentication(mux, s.Authentication.Authenticator, filters.Unauthorized(codecs), nil, s.Authentication.Config)
	return filters.WithRequestInfo(h, &request.RequestInfoFactory{
		APIPrefixes:          sets.NewString("api", "apis"),
		GrouplessAPIPrefixes: sets.NewString("api"),
	})
}

// GroupPrefix is the root of the group: a server routes everything under
// it to Handler.
const GroupPrefix = "/apis/" + paths.Group

// newCodecs encodes the Status of refusals, as an apiserver does.
func newCodecs() serializer.CodecFactory {
	scheme := runtime.NewScheme()
	// Status is registered unversioned, so every group version encodes it.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return serializer.NewCodecFactory(scheme)
}

// Resources is the version's discovery: the two subresources, named and
// typed as OpenShift's.
func Resources() []metav1.APIResource {
	return []metav1.APIResource{
		{Name: paths.Resource + "/" + paths.InstantiateBinary, Namespaced: true, Kind: "BinaryBuildRequestOptions", Verbs: metav1.Verbs{"create"}},
		{Name: paths.Resource + "/" + paths.Webhooks, Namespaced: true, Kind: "Build", Verbs: metav1.Verbs{"create"}},
	}
}

func serveGroup(w http.ResponseWriter, _ *http.Request) {
	v := metav1.GroupVersionForDiscovery{GroupVersion: GroupVersion.String(), Version: GroupVersion.Version}
	writeJSON(w, &metav1.APIGroup{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:     GroupVersion.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v,
	})
}

func serveResources(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: GroupVersion.String(), APIResources: Resources(),
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_ = json.NewEncoder(w).Encode(v)
}

// withRelayedClientAddress counts a delivery's failures against the client
// the apiserver relayed (the address its proxy appended last to
// X-Forwarded-For), not against the apiserver: the request was
// authenticated as the apiserver's, so that entry is the apiserver's word.
func withRelayedClientAddress(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if addr := relayedClient(r.Header.Values("X-Forwarded-For")); addr != "" {
			r = r.WithContext(scm.WithClientAddress(r.Context(), addr))
		}
		h.ServeHTTP(w, r)
	})
}

// relayedClient is the last address of X-Forwarded-For ("" when it is not
// an IP address).
func relayedClient(values []string) string {
	if len(values) == 0 {
		return ""
	}
	last := values[len(values)-1]
	if i := strings.LastIndex(last, ","); i >= 0 {
		last = last[i+1:]
	}
	ip := net.ParseIP(strings.TrimSpace(last))
	if ip == nil {
		return ""
	}
	return ip.String()
}
