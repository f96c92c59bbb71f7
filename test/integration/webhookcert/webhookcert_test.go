// Package webhookcert tests build-controller --cert-management=internal on
// the bed: the real binary, started as a process against the bed's
// kube-apiserver, fills the webhook certificate Secret, injects its CA into
// the webhook configuration of manifests/scheduling/protection, serves the
// certificate, and renews both; the apiserver's own calls to the webhook
// show each step works.
package webhookcert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
	"github.com/archway-build/archway/pkg/scheduling/protection"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

const (
	namespace = "archway-system"
	tenant    = "tenant"
	// tenantUser creates the pods the webhook judges.
	tenantUser = "tenant-user"
	// protectedNode is a node object only: admission needs no kubelet.
	protectedNode = "control-plane-1"
)

var (
	testBed *bed.Bed
	// k8s knows archway's scheduling types.
	k8s client.Client
)

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Options{
		Name:        "webhookcert suite",
		Bed:         bed.Options{WithoutNodes: true, WithoutRegistry: true},
		AddToScheme: []func(*runtime.Scheme) error{schedulingv1alpha1.AddToScheme},
		Setup: func(_ context.Context, s *framework.Suite) (func(), error) {
			testBed, k8s = s.Bed, s.Client
			return nil, nil
		},
	}))
}

// controller is build-controller running as a process.
type controller struct {
	cmd       *exec.Cmd
	cancel    func()
	logs      *syncBuffer
	probePort int
	port      int
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func buildController(t *testing.T) string {
	t.Helper()
	bin, err := bed.GoBuild(t.Context(), t.TempDir(), "./cmd/build-controller")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startController runs the control-plane protection webhook with internal
// certificates and extra flags.
func startController(t *testing.T, bin string, port int, extra ...string) *controller {
	t.Helper()
	probePort, err := bed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &controller{cancel: cancel, logs: &syncBuffer{}, port: port, probePort: probePort}
	args := append([]string{
		"--kubeconfig=" + testBed.Kubeconfig,
		"--controllers=control-plane-protection-webhook",
		"--leader-elect=false",
		"--cert-management=internal",
		"--webhook-cert-secret=" + protection.CertSecretName,
		"--webhook-service=archway-control-plane-protection-webhook",
		// The bed's apiserver calls the webhook at https://localhost:<port>.
		"--webhook-cert-dns-names=localhost",
		"--webhook-cert-dir=" + filepath.Join(t.TempDir(), "certs"),
		"--webhook-port=" + strconv.Itoa(c.port),
		"--metrics-bind-address=0",
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(c.probePort),
	}, extra...)
	c.cmd = exec.CommandContext(ctx, bin, args...)
	c.cmd.Env = append(os.Environ(), "POD_NAMESPACE="+namespace)
	c.cmd.Stdout, c.cmd.Stderr = c.logs, c.logs
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = c.cmd.Wait()
		if t.Failed() {
			t.Logf("build-controller's log:\n%s", c.logs.String())
		}
	})
	return c
}

// ready reports whether /readyz answers 200.
func (c *controller) ready() bool {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", c.probePort))
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// servedCert is the certificate the webhook server presents.
func (c *controller) servedCert() (*x509.Certificate, error) {
	conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:8])
}

// setUp creates archway's namespace with the empty Secret the manifests
// ship, the protection's webhook configuration of the manifests pointed
// at port on localhost without a CA, the shipped ControlPlaneProtection
// (mode Inform, so an admission through the webhook comes back with a
// warning), a protected node and a tenant namespace where tenantUser may
// create pods.
func setUp(t *testing.T, port int) {
	t.Helper()
	ctx := t.Context()
	k := k8s
	for _, ns := range []string{namespace, tenant} {
		if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "pods"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "pods"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pods"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: tenantUser}}},
	} {
		if err := k.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: protection.CertSecretName}}
	if err := k.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Delete(context.Background(), secret) })

	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	readManifest(t, "manifests/scheduling/protection/validating_webhook_configuration.yaml", &vwc)
	if vwc.Name != protection.WebhookConfigurationName {
		t.Fatalf("the manifest's configuration is %q, build-controller injects into %q", vwc.Name, protection.WebhookConfigurationName)
	}
	for i := range vwc.Webhooks {
		cc := &vwc.Webhooks[i].ClientConfig
		cc.URL = ptr.To(fmt.Sprintf("https://localhost:%d%s", port, *cc.Service.Path))
		cc.Service, cc.CABundle = nil, nil
	}
	if err := k.Create(ctx, &vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Delete(context.Background(), &vwc) })

	var cpp schedulingv1alpha1.ControlPlaneProtection
	readManifest(t, "manifests/scheduling/protection/control_plane_protection.yaml", &cpp)
	if err := k.Create(ctx, &cpp); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: protectedNode, Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}}
	if err := k.Create(ctx, node); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
}

func readManifest(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(bed.RepoRoot(), path))
	if err != nil {
		t.Fatal(err)
	}
	// The first document after the leading comments.
	doc := data
	if i := bytes.Index(data, []byte("\n---")); i >= 0 {
		doc = data[:i]
	}
	if err := yaml.Unmarshal(doc, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// caBundles are the caBundles of the configuration's webhooks.
func caBundles(t *testing.T) [][]byte {
	t.Helper()
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := k8s.Get(t.Context(), client.ObjectKey{Name: protection.WebhookConfigurationName}, &vwc); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, w := range vwc.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	return out
}

func secretData(t *testing.T) map[string][]byte {
	t.Helper()
	var s corev1.Secret
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: protection.CertSecretName}, &s); err != nil {
		t.Fatal(err)
	}
	return s.Data
}

// warnings collects the admission warnings the apiserver returns.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// admitThroughWebhook creates a pod naming the protected node: the
// apiserver sends it to the webhook (failurePolicy Fail), and the
// protection in mode Inform admits it with a warning, which shows the call
// went through over TLS. It returns the create's error.
func admitThroughWebhook(t *testing.T, name string) error {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(testBed.Config)
	cfg.WarningHandlerWithContext = nil
	cfg.WarningHandler = w
	// Not the bed's admin: system:masters is an authorized group.
	cfg.Impersonate = rest.ImpersonationConfig{UserName: tenantUser, Groups: []string{"system:authenticated"}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant},
		Spec: corev1.PodSpec{
			NodeName:   protectedNode,
			Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/app:1"}},
		},
	}
	if _, err := cs.CoreV1().Pods(tenant).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	got := w.take()
	if !containsSubstring(got, "protected node group ControlPlane") {
		t.Fatalf("pod %s admitted without the webhook's warning (warnings %q): the webhook was not called", name, got)
	}
	return nil
}

func containsSubstring(list []string, sub string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, sub) })
}

// TestInternalCertificates: build-controller fills the empty Secret,
// injects the CA into the configuration, serves a certificate that chains
// to it for the Service's DNS names, becomes ready, and the apiserver's
// admission through the webhook succeeds. The serving certificate is then
// renewed before it expires (a 30 s validity, renewed 20 s ahead, checked
// every second) without a new CA; emptying the Secret makes a new CA, which
// is injected and served, and admission goes on working.
func TestInternalCertificates(t *testing.T) {
	bin := buildController(t)
	port, err := bed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	setUp(t, port)
	c := startController(t, bin, port,
		"--webhook-cert-validity=30s", "--webhook-cert-lookahead=20s", "--webhook-cert-check-interval=1s", "--webhook-ca-validity=1h")

	// Ready: the Secret filled, the CA injected, the certificate served.
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, bed.CaseTimeout, true, func(context.Context) (bool, error) {
		return c.ready(), nil
	}); err != nil {
		t.Fatalf("build-controller never became ready: %v", err)
	}
	data := secretData(t)
	for _, k := range []string{"ca.crt", "ca.key", "tls.crt", "tls.key"} {
		if len(data[k]) == 0 {
			t.Fatalf("the Secret has no %s after readiness", k)
		}
	}
	ca := data["ca.crt"]
	for i, b := range caBundles(t) {
		if !bytes.Equal(b, ca) {
			t.Fatalf("webhook %d's caBundle is not the Secret's CA", i)
		}
	}
	served := checkServed(t, c, ca)
	for _, want := range []string{"archway-control-plane-protection-webhook.archway-system.svc", "archway-control-plane-protection-webhook.archway-system.svc.cluster.local", "localhost"} {
		if !slices.Contains(served.DNSNames, want) {
			t.Fatalf("the served certificate's DNS names %v lack %s", served.DNSNames, want)
		}
	}
	if err := admitThroughWebhook(t, "first"); err != nil {
		t.Fatalf("admission through the webhook with the injected CA: %v", err)
	}

	// Renewal before expiry: a new certificate served, the same CA.
	first := fingerprint(served.Raw)
	var renewed *x509.Certificate
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, bed.LongTimeout, true, func(context.Context) (bool, error) {
		cert, err := c.servedCert()
		if err != nil {
			return false, nil
		}
		if fingerprint(cert.Raw) != first {
			renewed = cert
			return true, nil
		}
		return false, nil
	}); err != nil {
		t.Fatalf("the serving certificate %s was not renewed within a minute of its 30 s validity: %v", first, err)
	}
	if !bytes.Equal(secretData(t)["ca.crt"], ca) {
		t.Fatal("renewing the serving certificate changed the CA")
	}
	verify(t, renewed, ca)
	if err := admitThroughWebhook(t, "after-renewal"); err != nil {
		t.Fatalf("admission after the certificate was renewed: %v", err)
	}

	// A new CA: empty the Secret.
	var s corev1.Secret
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: protection.CertSecretName}, &s); err != nil {
		t.Fatal(err)
	}
	s.Data = nil
	if err := k8s.Update(t.Context(), &s); err != nil {
		t.Fatal(err)
	}
	var newCA []byte
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, bed.LongTimeout, true, func(context.Context) (bool, error) {
		d := secretData(t)
		if len(d["ca.crt"]) == 0 || bytes.Equal(d["ca.crt"], ca) {
			return false, nil
		}
		for _, b := range caBundles(t) {
			if !bytes.Equal(b, d["ca.crt"]) {
				return false, nil
			}
		}
		cert, err := c.servedCert()
		if err != nil || verifyErr(cert, d["ca.crt"]) != nil {
			return false, nil
		}
		newCA = d["ca.crt"]
		return true, nil
	}); err != nil {
		t.Fatalf("after the Secret was emptied, no new CA was injected and served: %v", err)
	}
	if verifyErr(renewed, newCA) == nil {
		t.Fatal("the certificate before the new CA verifies against it: the CA did not change")
	}
	if err := admitThroughWebhook(t, "after-new-ca"); err != nil {
		t.Fatalf("admission after the new CA: %v", err)
	}
}

func checkServed(t *testing.T, c *controller, ca []byte) *x509.Certificate {
	t.Helper()
	cert, err := c.servedCert()
	if err != nil {
		t.Fatalf("reading the served certificate: %v", err)
	}
	verify(t, cert, ca)
	return cert
}

func verify(t *testing.T, cert *x509.Certificate, ca []byte) {
	t.Helper()
	if err := verifyErr(cert, ca); err != nil {
		t.Fatalf("the served certificate does not verify against the injected CA: %v", err)
	}
}

func verifyErr(cert *x509.Certificate, ca []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no CA in %q", ca)
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"})
	return err
}

// TestInternalCertificatesNeedTheSecret: without the Secret the manifests
// ship, build-controller stops at start saying so, and creates nothing.
func TestInternalCertificatesNeedTheSecret(t *testing.T) {
	bin := buildController(t)
	ctx, cancel := context.WithTimeout(t.Context(), bed.LongTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--kubeconfig="+testBed.Kubeconfig,
		"--controllers=control-plane-protection-webhook",
		"--leader-elect=false",
		"--cert-management=internal",
		"--webhook-cert-secret=missing-tls",
		"--webhook-service=svc",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--webhook-port=0")
	cmd.Env = append(os.Environ(), "POD_NAMESPACE="+namespace)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("build-controller started without its certificate Secret:\n%s", out)
	}
	if !strings.Contains(string(out), "the webhook certificate Secret archway-system/missing-tls must exist") {
		t.Fatalf("the error does not name the missing Secret:\n%s", out)
	}
	var s corev1.Secret
	if err := k8s.Get(t.Context(), client.ObjectKey{Namespace: namespace, Name: "missing-tls"}, &s); err == nil {
		t.Fatal("the Secret exists after the failed start")
	}
}
