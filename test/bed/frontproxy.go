package bed

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// FrontProxyClientName is the common name of the apiserver's front-proxy
// client certificate, the one name --requestheader-allowed-names allows.
const FrontProxyClientName = "front-proxy-client"

// FrontProxy is the bed apiserver's front-proxy CA, as a cluster's
// (kubeadm's front-proxy-ca): the apiserver proxies to aggregated APIs
// with a client certificate it signed (--proxy-client-cert-file) and
// publishes it, the allowed names and the user headers in
// kube-system/extension-apiserver-authentication
// (--requestheader-client-ca-file, --requestheader-*).
type FrontProxy struct {
	// CAPEM is the CA's certificate.
	CAPEM []byte

	ca  *x509.Certificate
	key crypto.Signer
}

// ClientCertificate is a client certificate the CA signed with common name
// cn: FrontProxyClientName's is as good as the apiserver's own.
func (f *FrontProxy) ClientCertificate(cn string) (tls.Certificate, error) {
	crt, key, err := signClientCert(f.ca, f.key, cn)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(crt, key)
}

// configureFrontProxy writes the front-proxy CA and the apiserver's client
// certificate into dir and sets the apiserver's flags.
func (b *Bed) configureFrontProxy(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "bed-front-proxy-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	b.FrontProxy = &FrontProxy{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca: ca, key: key}
	crt, crtKey, err := signClientCert(ca, key, FrontProxyClientName)
	if err != nil {
		return err
	}
	files := map[string][]byte{"ca.crt": b.FrontProxy.CAPEM, "client.crt": crt, "client.key": crtKey}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	b.env.ControlPlane.GetAPIServer().Configure().
		Set("requestheader-client-ca-file", filepath.Join(dir, "ca.crt")).
		Set("requestheader-allowed-names", FrontProxyClientName).
		Set("requestheader-username-headers", "X-Remote-User").
		Set("requestheader-uid-headers", "X-Remote-Uid").
		Set("requestheader-group-headers", "X-Remote-Group").
		Set("requestheader-extra-headers-prefix", "X-Remote-Extra-").
		Set("proxy-client-cert-file", filepath.Join(dir, "client.crt")).
		Set("proxy-client-key-file", filepath.Join(dir, "client.key"))
	return nil
}

// signClientCert is a client certificate (and its key, PEM) for cn signed
// by ca.
func signClientCert(ca *x509.Certificate, caKey crypto.Signer, cn string) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// AddUser makes a user of the apiserver authenticated by a client
// certificate (signed by the apiserver's client CA) with the groups given,
// and returns a config that reaches the apiserver as that user and the
// path of a kubeconfig file of it (in the bed's directory).
func (b *Bed) AddUser(name string, groups ...string) (*rest.Config, string, error) {
	u, err := b.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, "", fmt.Errorf("bed: user %s: %w", name, err)
	}
	kubeconfig, err := u.KubeConfig()
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(b.Dir, "user-"+name+".kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		return nil, "", err
	}
	return u.Config(), path, nil
}

// ServiceAddress is an address of this host that the apiserver reaches
// and an EndpointSlice may name (not loopback): the first of a /24 of
// 198.18.0.0/16 claimed as the pod runner claims pod addresses (a local
// route on lo; needs root and ip), released by Stop. A server a test runs
// in its own process listens there behind a selectorless Service, for
// the apiserver to call it by Service (an aggregated API).
func (b *Bed) ServiceAddress() (string, error) {
	prefix, err := claimPodSubnet()
	if err != nil {
		return "", err
	}
	b.subnets = append(b.subnets, prefix)
	return prefix + "1", nil
}
