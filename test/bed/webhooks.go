package bed

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Webhooks is a webhook server a suite runs in its own process: a manager
// of its own serving over TLS on loopback, with the certificate envtest
// made for the webhook configurations of the repository's manifests.
type Webhooks struct {
	// Manager hosts the webhooks (its cache is theirs).
	Manager ctrl.Manager
	// URL is https://127.0.0.1:<port>, the server's root.
	URL string
	// CA is the PEM of the CA that signed the serving certificate.
	CA []byte

	install *envtest.WebhookInstallOptions
	stop    func()
}

// StartWebhooks starts a manager whose webhooks setup adds, serving with
// the certificate and port envtest makes for the webhook configurations in
// manifests (paths relative to the repository's root, e.g.
// "manifests/placement/mutating_webhook_configuration.yaml"). It returns
// once the manager's caches have synced and the server completes TLS
// handshakes; Install then registers the configurations.
func (b *Bed) StartWebhooks(ctx context.Context, scheme *runtime.Scheme, manifests []string, setup func(ctrl.Manager) error) (*Webhooks, error) {
	w := &Webhooks{install: &envtest.WebhookInstallOptions{LocalServingHost: "127.0.0.1"}}
	for _, m := range manifests {
		w.install.Paths = append(w.install.Paths, filepath.Join(RepoRoot(), m))
	}
	// The certificate and port first: the server needs them before the
	// configurations point the apiserver at it.
	if err := w.install.PrepWithoutInstalling(); err != nil {
		return nil, fmt.Errorf("webhook certificates: %w", err)
	}
	host, port := w.install.LocalServingHost, w.install.LocalServingPort
	w.CA, w.URL = w.install.LocalServingCAData, "https://"+net.JoinHostPort(host, strconv.Itoa(port))
	mgr, err := ctrl.NewManager(b.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: w.install.LocalServingCertDir}),
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		_ = w.install.Cleanup()
		return nil, err
	}
	w.Manager = mgr
	if err := setup(mgr); err != nil {
		_ = w.install.Cleanup()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "webhook manager:", err)
		}
	}()
	w.stop = func() { cancel(); <-done; _ = w.install.Cleanup() }
	syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
	defer cancelSync()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		w.Stop()
		return nil, fmt.Errorf("the webhooks' informers did not sync")
	}
	if err := WaitServing(syncCtx, w.URL, w.CA); err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

// Install creates the webhook configurations, pointed at this server, and
// waits until the apiserver calls it.
func (w *Webhooks) Install() error {
	return w.install.Install(w.Manager.GetConfig())
}

// Stop ends the server, waits for it, and removes its certificate.
func (w *Webhooks) Stop() {
	if w.stop != nil {
		w.stop()
	}
}

// WriteServingCert writes tls.crt and tls.key for 127.0.0.1, signed by a
// fresh CA, into dir and returns the CA certificate (PEM): for servers a
// suite starts as processes of their own.
func WriteServingCert(dir string) ([]byte, error) {
	caPEM, certPEM, keyPEM, err := ServingCert(net.ParseIP("127.0.0.1"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		return nil, err
	}
	return caPEM, nil
}

// ServingCert makes a fresh CA and a server certificate it signs for ip,
// all PEM (the key PKCS #8).
func ServingCert(ip net.IP) (caPEM, certPEM, keyPEM []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "archway-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip.String()},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{ip},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// WaitServing waits until the server of rawURL completes a TLS handshake
// with a client trusting ca.
func WaitServing(ctx context.Context, rawURL string, ca []byte) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		if err != nil {
			return false, nil
		}
		_ = conn.Close()
		return true, nil
	})
}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func FreePort() (int, error) { return freePort() }
