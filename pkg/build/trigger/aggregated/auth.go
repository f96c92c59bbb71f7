package aggregated

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
)

// ConfigMapName is the ConfigMap of kube-system in which the kube-apiserver
// publishes how it authenticates to aggregated APIs: the CA of its
// front-proxy client certificate (requestheader-client-ca-file), the names
// that certificate may have and the headers carrying the user.
const ConfigMapName = "extension-apiserver-authentication"

// Authentication is the front-proxy authentication of the aggregated API
// (k8s.io/apiserver's request-header authenticator): a request is
// authenticated only when its TLS client certificate verifies against the
// CA published in ConfigMapName, for client authentication, with one of the
// allowed names when the apiserver lists any; the user is then read from
// the published headers (X-Remote-User, X-Remote-Group, X-Remote-Extra-*).
// Nothing else authenticates: headers from any other peer are ignored and
// such a request is refused (401), bearer tokens included.
type Authentication struct {
	// Authenticator authenticates requests.
	Authenticator authenticator.Request
	// Config is what it reads, for the filter that removes the headers
	// once read.
	Config *authenticatorfactory.RequestHeaderConfig

	ca      *dynamiccertificates.ConfigMapCAController
	headers *headerrequest.RequestHeaderAuthRequestController
}

// NewAuthentication reads ConfigMapName once (failing when it may not) and
// returns the authentication; Start keeps it current (list and watch of
// that ConfigMap by name).
// A cluster whose apiserver publishes no front-proxy CA authenticates
// nothing until it does (the controllers retry).
func NewAuthentication(ctx context.Context, cs kubernetes.Interface) (*Authentication, error) {
	ca, err := dynamiccertificates.NewDynamicCAFromConfigMapController("front-proxy-ca", metav1.NamespaceSystem, ConfigMapName,
		"requestheader-client-ca-file", cs)
	if err != nil {
		return nil, err
	}
	headers := headerrequest.NewRequestHeaderAuthRequestController(ConfigMapName, metav1.NamespaceSystem, cs,
		"requestheader-username-headers", "requestheader-uid-headers", "requestheader-group-headers",
		"requestheader-extra-headers-prefix", "requestheader-allowed-names")
	if err := headers.RunOnce(ctx); err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s (build-triggers' ClusterRole grants get, list and watch of it): %w",
			metav1.NamespaceSystem, ConfigMapName, err)
	}
	// Never fails: an apiserver without a front-proxy CA leaves it empty.
	_ = ca.RunOnce(ctx)
	cfg := &authenticatorfactory.RequestHeaderConfig{
		CAContentProvider:   ca,
		UsernameHeaders:     headerrequest.StringSliceProviderFunc(headers.UsernameHeaders),
		UIDHeaders:          headerrequest.StringSliceProviderFunc(headers.UIDHeaders),
		GroupHeaders:        headerrequest.StringSliceProviderFunc(headers.GroupHeaders),
		ExtraHeaderPrefixes: headerrequest.StringSliceProviderFunc(headers.ExtraHeaderPrefixes),
		AllowedClientNames:  headerrequest.StringSliceProviderFunc(headers.AllowedClientNames),
	}
	// No anonymous authenticator, no token review, no client CA: only the
	// front proxy.
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{RequestHeaderConfig: cfg}.New()
	if err != nil {
		return nil, err
	}
	return &Authentication{Authenticator: authn, Config: cfg, ca: ca, headers: headers}, nil
}

// Start keeps the CA and the headers current with the ConfigMap until ctx
// ends (a manager.Runnable; every replica).
func (a *Authentication) Start(ctx context.Context) error {
	go a.ca.Run(ctx, 1)
	a.headers.Run(ctx, 1)
	return nil
}

// NeedLeaderElection is false: every replica serves.
func (a *Authentication) NeedLeaderElection() bool { return false }

// Ready says whether a front-proxy CA is loaded (a readiness check would
// hold back the direct endpoint too: this is for logs and tests).
func (a *Authentication) Ready() bool {
	_, ok := a.ca.VerifyOptions()
	return ok
}

// The authorizer's answer caches: a burst of uploads or deliveries by one
// user costs one SubjectAccessReview per TTL.
const (
	allowCacheTTL = 10 * time.Second
	denyCacheTTL  = 10 * time.Second
)

// NewAuthorizer is the delegating authorizer (k8s.io/apiserver): each
// decision is a SubjectAccessReview the apiserver answers with its
// authorizers (RBAC), cached for a few seconds.
func NewAuthorizer(cs kubernetes.Interface) (authorizer.Authorizer, error) {
	return authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: cs.AuthorizationV1(),
		AllowCacheTTL:             allowCacheTTL,
		DenyCacheTTL:              denyCacheTTL,
		// The kube-apiserver's own webhook backoff (without linking its
		// options package, which brings the storage layers).
		WebhookRetryBackoff: &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5},
	}.New()
}
