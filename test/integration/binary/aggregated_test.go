package binary

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/trigger/aggregated"
	"github.com/archway-build/archway/pkg/build/trigger/binary"
	"github.com/archway-build/archway/pkg/build/trigger/paths"
	"github.com/archway-build/archway/pkg/build/trigger/scm"
	"github.com/archway-build/archway/pkg/registry"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

// aggregatedAPI is build-triggers' aggregated API as build-controller
// serves it (package aggregated over the binary and scm handlers), run in
// this process behind the shipped APIService: a selectorless Service whose
// EndpointSlice names this host's address, so that the bed's apiserver
// proxies to it as it would to the build-triggers pods.
type aggregatedAPI struct {
	// addr is the server's host:port, for requests that bypass the
	// apiserver.
	addr string
	// ca trusts the server's certificate.
	ca []byte
}

// apiServiceNamespace and apiServiceService are the Service the shipped
// APIService names.
const (
	apiServiceNamespace = "archway-system"
	apiServiceService   = "archway-build-triggers"
)

// startAggregated serves the aggregated API until ctx ends, registers it
// and waits until the APIService is Available.
func startAggregated(ctx context.Context) (*aggregatedAPI, error) {
	ip, err := testBed.ServiceAddress()
	if err != nil {
		return nil, err
	}
	host := apiServiceService + "." + apiServiceNamespace + ".svc"
	crt, key, err := cert.GenerateSelfSignedCertKey(host, nil, []string{host})
	if err != nil {
		return nil, err
	}
	serving, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(testBed.Config)
	if err != nil {
		return nil, err
	}
	authn, err := aggregated.NewAuthentication(ctx, cs)
	if err != nil {
		return nil, err
	}
	go func() { _ = authn.Start(ctx) }()
	// The apiserver publishes its front-proxy CA shortly after it starts.
	if err := framework.Poll(ctx, bed.LongTimeout, func(context.Context) (bool, error) { return authn.Ready(), nil }); err != nil {
		cm, _ := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, aggregated.ConfigMapName, metav1.GetOptions{})
		return nil, fmt.Errorf("the bed's apiserver publishes no front-proxy CA: %w (%v)", err, cm)
	}
	authz, err := aggregated.NewAuthorizer(cs)
	if err != nil {
		return nil, err
	}
	starter := instantiate.NewStarter(testBed.Client, nil)
	hooks := scm.NewHandler(testBed.Client, starter, nil)
	api := (&aggregated.Server{
		Authentication: authn,
		Authorizer:     authz,
		Binary: &binary.Handler{Client: testBed.Client, Reader: testBed.Client, Starter: starter,
			Access: registry.Access{UserAgent: "archway-test"}, Delegated: true},
		Webhooks: http.HandlerFunc(hooks.ServeDelivery),
	}).Handler()
	mux := http.NewServeMux()
	mux.Handle(aggregated.GroupPrefix, api)
	mux.Handle(aggregated.GroupPrefix+"/", api)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, err
	}
	// As build-controller's webhook server is configured for it: a client
	// certificate is asked for, and verified by the authenticator.
	srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{serving}, ClientAuth: tls.RequestClientCert}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	port := ln.Addr().(*net.TCPAddr).Port

	c := testBed.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apiServiceNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	if err := c.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: apiServiceNamespace, Name: apiServiceService},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(port))}}},
	}); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: apiServiceNamespace, Name: apiServiceService + "-test",
			Labels: map[string]string{discoveryv1.LabelServiceName: apiServiceService}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}); err != nil {
		return nil, err
	}
	// The shipped APIService, with the CA build-triggers would inject.
	data, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "manifests", "build-triggers", "apiservice.yaml"))
	if err != nil {
		return nil, err
	}
	svc := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &svc.Object); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedField(svc.Object, base64.StdEncoding.EncodeToString(crt), "spec", "caBundle"); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, svc); err != nil {
		return nil, err
	}
	err = framework.Poll(ctx, bed.LongTimeout, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(svc.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Available" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("APIService %s not Available: %w (%v)", paths.APIServiceName, err, svc.Object["status"])
	}
	return &aggregatedAPI{addr: net.JoinHostPort(ip, strconv.Itoa(port)), ca: crt}, nil
}

// post sends body to the apiserver's path as cfg's user, and returns the
// status code and the body of the answer.
func post(t *testing.T, ctx context.Context, cfg *rest.Config, path string, body []byte, contentType string) (int, string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, ctx, hc, apiServerURL(t, cfg)+path, nil, body, contentType)
}

// apiServerURL is the apiserver's root as cfg reaches it.
func apiServerURL(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	u, _, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(u.String(), "/")
}

func do(t *testing.T, ctx context.Context, hc *http.Client, url string, hdr http.Header, body []byte, contentType string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// direct is a client of the aggregated API's own address (the Service's
// endpoint), bypassing the apiserver, presenting certs.
func (a *aggregatedAPI) direct(t *testing.T, certs ...tls.Certificate) *http.Client {
	t.Helper()
	pool, err := cert.NewPoolFromBytes(a.ca)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, ServerName: apiServiceService + "." + apiServiceNamespace + ".svc", Certificates: certs,
	}}}
}

// sourceArchive is a gzipped tar of a Dockerfile.
func sourceArchive(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	content := []byte("FROM scratch\nCOPY . /src\n")
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(content))}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write(content)
	_ = tw.Close()
	_ = gz.Close()
	return buf.Bytes()
}

// bindUser binds clusterRole to the user in the harness's namespace.
func (h *harness) bindUser(user, clusterRole string) {
	h.t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: user}}}
	if err := testBed.Client.Create(h.ctx, rb); err != nil {
		h.t.Fatal(err)
	}
}

// TestAggregatedDiscovery: the APIService is Available (startAggregated
// waited for it) and the apiserver's discovery lists the two
// subresources.
func TestAggregatedDiscovery(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(testBed.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := dc.ServerResourcesForGroupVersion(paths.Group + "/" + paths.Version)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.APIResources {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, ","); got != "buildconfigs/instantiatebinary,buildconfigs/webhooks" {
		t.Errorf("discovery of %s: %s", paths.APIServiceName, got)
	}
}

// TestAggregatedUpload: a user authenticated by a client certificate (which
// the direct endpoint cannot take) uploads through the apiserver and a
// binary Build starts; a user without the right is refused.
func TestAggregatedUpload(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "agg-upload")
	h.buildConfig("app", false)
	alice := "alice-" + h.ns
	cfg, kubeconfig, err := testBed.AddUser(alice)
	if err != nil {
		t.Fatal(err)
	}
	h.bindUser(alice, "archway:build-starter")
	// kubectl archway with the client-certificate kubeconfig.
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"Dockerfile": "FROM scratch\nCOPY . /src\n", "hello.txt": "hello\n"})
	out, err := h.pluginViaAPIServer(kubeconfig, "start-build", "app", "--from-dir", dir, "--platforms", "linux/amd64,linux/arm64")
	if err != nil || out != "build.build.openshift.io/app-1 started\n" {
		t.Fatalf("start-build --from-dir through the apiserver: %v, %q", err, out)
	}
	b := h.build("app-1")
	if !strings.HasPrefix(b.Spec.Source.Binary.Artifact, testBed.Registry.Host+"/"+h.repo()+"@sha256:") ||
		strings.Join(b.Spec.Platforms, ",") != "linux/amd64,linux/arm64" {
		t.Errorf("app-1: source %+v, platforms %v", b.Spec.Source, b.Spec.Platforms)
	}
	if got := h.extracted(b); strings.Join(got, ",") != "Dockerfile,hello.txt" {
		t.Errorf("app-1's input: %v", got)
	}
	path := paths.Binary(paths.AggregatedPrefix, h.ns, "app")
	if code, body := post(t, h.ctx, cfg, path, sourceArchive(t), "application/octet-stream"); code != http.StatusCreated {
		t.Fatalf("alice's POST through the apiserver: %d %s", code, body)
	}

	// Without a binding, the apiserver refuses before proxying.
	bob := "bob-" + h.ns
	bobCfg, _, err := testBed.AddUser(bob)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, h.ctx, bobCfg, path, sourceArchive(t), "application/octet-stream"); code != http.StatusForbidden {
		t.Errorf("bob's upload through the apiserver: %d %s, want 403", code, body)
	}
	if names := h.builds(); len(names) != 2 {
		t.Errorf("builds: %v, want app-1 and app-2 alone", names)
	}
}

// TestAggregatedAuthorizes: build-triggers authorizes the user the
// apiserver names, and does not take the apiserver's authorization on
// trust: a request carrying a genuine front-proxy certificate for a user
// without the right is refused (403) and starts nothing.
func TestAggregatedAuthorizes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "agg-authz")
	h.buildConfig("app", false)
	proxy, err := testBed.FrontProxy.ClientCertificate(bed.FrontProxyClientName)
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + agg.addr + paths.Binary(paths.AggregatedPrefix, h.ns, "app")
	as := func(user string) http.Header {
		return http.Header{"X-Remote-User": {user}, "X-Remote-Group": {"system:authenticated"}}
	}
	code, body := do(t, h.ctx, agg.direct(t, proxy), url, as("mallory-"+h.ns), sourceArchive(t), "application/octet-stream")
	if code != http.StatusForbidden || !strings.Contains(body, "buildconfigs/instantiatebinary") {
		t.Errorf("mallory: %d %s, want 403 for buildconfigs/instantiatebinary", code, body)
	}
	if names := h.builds(); len(names) != 0 {
		t.Fatalf("mallory started %v", names)
	}
	// The same request for a user with the right starts a build: the 403
	// was the authorization's.
	carol := "carol-" + h.ns
	h.bindUser(carol, "archway:build-starter")
	err = framework.Poll(h.ctx, bed.LongTimeout, func(ctx context.Context) (bool, error) {
		code, body = do(t, ctx, agg.direct(t, proxy), url, as(carol), sourceArchive(t), "application/octet-stream")
		return code == http.StatusCreated, nil
	})
	if err != nil {
		t.Fatalf("carol: %d %s", code, body)
	}
}

// TestAggregatedRefusesForgedHeaders: build-triggers believes the user
// headers only from a peer with a front-proxy certificate of the
// apiserver's CA and an allowed name. A direct request naming a cluster
// admin in them is refused (401) and starts nothing: without a
// certificate, with a client certificate of another CA (one the apiserver
// accepts from users), and with a front-proxy certificate of a name the
// apiserver does not allow.
func TestAggregatedRefusesForgedHeaders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "agg-forged")
	h.buildConfig("app", false)
	url := "https://" + agg.addr + paths.Binary(paths.AggregatedPrefix, h.ns, "app")
	admin := http.Header{"X-Remote-User": {"bed-admin"}, "X-Remote-Group": {"system:masters", "system:authenticated"}}

	userCfg, _, err := testBed.AddUser("forger-" + h.ns)
	if err != nil {
		t.Fatal(err)
	}
	userCert, err := tls.X509KeyPair(userCfg.CertData, userCfg.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	otherName, err := testBed.FrontProxy.ClientCertificate("not-the-front-proxy")
	if err != nil {
		t.Fatal(err)
	}
	for name, certs := range map[string][]tls.Certificate{
		"no certificate":                 nil,
		"a user's client certificate":    {userCert},
		"a front-proxy name not allowed": {otherName},
	} {
		code, body := do(t, h.ctx, agg.direct(t, certs...), url, admin, sourceArchive(t), "application/octet-stream")
		if code != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", name, code, body)
		}
	}
	if names := h.builds(); len(names) != 0 {
		t.Fatalf("forged requests started %v", names)
	}
}

// TestAggregatedWebhook: an SCM delivery reaches build-triggers through
// the apiserver unauthenticated (archway:webhook-deliveries) and starts a
// build with the right secret; a wrong secret is refused and starts
// nothing. Anonymous uploads stay refused by the apiserver.
func TestAggregatedWebhook(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "agg-webhook")
	bc := h.buildConfig("app", true)
	if err := testBed.Client.Create(h.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "hook"},
		Data: map[string][]byte{buildv1.WebHookSecretKey: []byte("s3cret")}}); err != nil {
		t.Fatal(err)
	}
	bc.Spec.Triggers = []buildv1.BuildTriggerPolicy{{Type: buildv1.GenericWebHookBuildTriggerType,
		GenericWebHook: &buildv1.WebHookTrigger{SecretReference: &buildv1.SecretLocalReference{Name: "hook"}}}}
	if err := testBed.Client.Update(h.ctx, bc); err != nil {
		t.Fatal(err)
	}
	anonymous := rest.AnonymousClientConfig(testBed.Config)
	code, body := post(t, h.ctx, anonymous, paths.Webhook(paths.AggregatedPrefix, h.ns, "app", "wrong", "generic"), []byte("{}"), "application/json")
	if code != http.StatusNotFound {
		t.Errorf("wrong secret: %d %s, want 404", code, body)
	}
	if names := h.builds(); len(names) != 0 {
		t.Fatalf("a wrong secret started %v", names)
	}
	code, body = post(t, h.ctx, anonymous, paths.Webhook(paths.AggregatedPrefix, h.ns, "app", "s3cret", "generic"), []byte("{}"), "application/json")
	if code != http.StatusOK || !strings.Contains(body, "build app-1 started") {
		t.Fatalf("delivery through the apiserver: %d %s", code, body)
	}
	if b := h.build("app-1"); b.Spec.TriggeredBy[0].GenericWebHook == nil {
		t.Errorf("app-1 triggered by %+v", b.Spec.TriggeredBy)
	}
	if code, body := post(t, h.ctx, anonymous, paths.Binary(paths.AggregatedPrefix, h.ns, "app"), sourceArchive(t), "application/octet-stream"); code != http.StatusUnauthorized && code != http.StatusForbidden {
		t.Errorf("anonymous upload: %d %s, want 401 or 403", code, body)
	}
	// describe bc prints the URL on the cluster's API address.
	out, err := h.pluginViaAPIServer(testBed.Kubeconfig, "describe", "bc/app")
	want := apiServerURL(t, testBed.Config) + paths.Webhook(paths.AggregatedPrefix, h.ns, "app", "<secret>", "generic")
	if err != nil || !strings.Contains(out, want) {
		t.Errorf("describe bc: %v, want %s in\n%s", err, want, out)
	}
}
