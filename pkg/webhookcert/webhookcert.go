// Package webhookcert gives build-controller's webhook server a serving
// certificate of its own making: open-policy-agent/cert-controller creates a
// CA and a certificate for the webhook Service's DNS names, keeps them in a
// Secret, renews them before they expire and injects the CA into archway's
// webhook configurations; this package serves the Secret's certificate from
// memory (swapped as soon as the Secret changes, with no wait for a kubelet
// to refresh a mounted volume) and reports ready once the certificate is
// served and the CA injected.
package webhookcert

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kind is the kind of a webhook configuration (or APIService).
type Kind string

// The objects a CA is injected into.
const (
	Mutating   Kind = "MutatingWebhookConfiguration"
	Validating Kind = "ValidatingWebhookConfiguration"
	// APIService is an aggregated API's: spec.caBundle gets the CA.
	APIService Kind = "APIService"
)

// Configuration names a webhook configuration whose webhooks call this
// server (every webhook's clientConfig.caBundle in it gets the CA), or an
// APIService the server serves (its spec.caBundle does).
type Configuration struct {
	Kind Kind
	Name string
}

// Defaults of Options' durations: cert-controller's.
const (
	DefaultCAValidity    = 10 * 365 * 24 * time.Hour
	DefaultValidity      = 365 * 24 * time.Hour
	DefaultLookahead     = 90 * 24 * time.Hour
	DefaultCheckInterval = 12 * time.Hour
)

// Options configures the certificates of one webhook server.
type Options struct {
	// Secret holds the CA, its key and the serving certificate and key
	// (ca.crt, ca.key, tls.crt, tls.key). It must exist: the manifests ship
	// it empty, so that RBAC can limit the server to updating that one
	// Secret.
	Secret types.NamespacedName
	// DNSNames are the names the certificate is valid for: the webhook
	// Service's <name>.<namespace>.svc first.
	DNSNames []string
	// Configurations get the CA injected.
	Configurations []Configuration
	// CertDir receives tls.crt and tls.key as served (cert-controller
	// waits for them there before injecting the CA).
	CertDir string
	// CAValidity and Validity are how long a new CA and a new serving
	// certificate are valid; both are renewed when they would expire within
	// Lookahead, which each check every CheckInterval (and each change of
	// the Secret or the configurations) looks at.
	CAValidity, Validity, Lookahead, CheckInterval time.Duration
}

// ServiceDNSNames are the DNS names of Service service in namespace.
func ServiceDNSNames(service, namespace string) []string {
	return []string{service + "." + namespace + ".svc", service + "." + namespace + ".svc.cluster.local"}
}

// withDefaults fills the zero durations.
func (o Options) withDefaults() Options {
	if o.CAValidity == 0 {
		o.CAValidity = DefaultCAValidity
	}
	if o.Validity == 0 {
		o.Validity = DefaultValidity
	}
	if o.Lookahead == 0 {
		o.Lookahead = DefaultLookahead
	}
	if o.CheckInterval == 0 {
		o.CheckInterval = DefaultCheckInterval
	}
	return o
}

// Validate says what is missing or inconsistent.
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	if o.Secret.Name == "" {
		errs = append(errs, errors.New("the Secret's name is required"))
	}
	if o.Secret.Namespace == "" {
		errs = append(errs, errors.New("the Secret's namespace is unknown (set POD_NAMESPACE or run in a pod)"))
	}
	if len(o.DNSNames) == 0 || o.DNSNames[0] == "" {
		errs = append(errs, errors.New("the webhook Service's name is required (the certificate is made for its DNS names)"))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("a certificate directory is required"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"CA validity", o.CAValidity}, {"validity", o.Validity}, {"lookahead", o.Lookahead}, {"check interval", o.CheckInterval}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("the %s %s is negative", d.name, d.v))
		}
	}
	// A lookahead as long as a validity would renew at every check.
	if o.Lookahead >= o.Validity || o.Lookahead >= o.CAValidity {
		errs = append(errs, fmt.Errorf("the lookahead %s must be shorter than the validity %s and the CA validity %s (else every check renews)",
			o.Lookahead, o.Validity, o.CAValidity))
	}
	if o.CheckInterval >= o.Lookahead {
		errs = append(errs, fmt.Errorf("the check interval %s must be shorter than the lookahead %s (else a certificate may expire between two checks)",
			o.CheckInterval, o.Lookahead))
	}
	return errors.Join(errs...)
}

// Certs serves the certificate cert-controller keeps in the Secret.
type Certs struct {
	opts Options
	// rotatorReady is closed by cert-controller once the certificate files
	// exist and the CA is injected.
	rotatorReady chan struct{}
	served       atomic.Pointer[tls.Certificate]
}

// New checks o and returns Certs serving nothing yet: hand its TLSOption to
// the webhook server, then Setup it on the manager.
func New(o Options) (*Certs, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Certs{opts: o.withDefaults(), rotatorReady: make(chan struct{})}, nil
}

// TLSOption makes a webhook server serve the current certificate (for
// webhook.Options.TLSOpts); until there is one, handshakes fail.
func (c *Certs) TLSOption(cfg *tls.Config) {
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if cert := c.served.Load(); cert != nil {
			return cert, nil
		}
		return nil, errors.New("no serving certificate yet: cert-controller has not filled the Secret " + c.opts.Secret.String())
	}
}

// CheckSecret fails when the Secret does not exist, with what to do about
// it: cert-controller only updates it.
func (c *Certs) CheckSecret(ctx context.Context, reader client.Reader) error {
	var s corev1.Secret
	if err := reader.Get(ctx, c.opts.Secret, &s); err != nil {
		return fmt.Errorf("the webhook certificate Secret %s must exist (archway's manifests ship it empty; build-controller fills it): %w",
			c.opts.Secret, err)
	}
	return nil
}

// Setup adds cert-controller's rotator, which fills and renews the Secret
// and injects the CA, and a watch of the Secret that serves its
// certificate. Both run on every replica: each serves webhooks.
func (c *Certs) Setup(mgr ctrl.Manager) error {
	if err := os.MkdirAll(c.opts.CertDir, 0o700); err != nil {
		return fmt.Errorf("webhook certificates: %w", err)
	}
	var webhooks []rotator.WebhookInfo
	for _, cfg := range c.opts.Configurations {
		t := rotator.Validating
		switch cfg.Kind {
		case Mutating:
			t = rotator.Mutating
		case APIService:
			t = rotator.APIService
		}
		webhooks = append(webhooks, rotator.WebhookInfo{Name: cfg.Name, Type: t})
	}
	if err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:              c.opts.Secret,
		CertDir:                c.opts.CertDir,
		CAName:                 "archway-webhook-ca",
		CAOrganization:         "archway",
		DNSName:                c.opts.DNSNames[0],
		ExtraDNSNames:          c.opts.DNSNames[1:],
		IsReady:                c.rotatorReady,
		Webhooks:               webhooks,
		FieldOwner:             "build-controller",
		RequireLeaderElection:  false,
		CaCertDuration:         c.opts.CAValidity,
		ServerCertDuration:     c.opts.Validity,
		LookaheadInterval:      c.opts.Lookahead,
		RotationCheckFrequency: c.opts.CheckInterval,
		EnableReadinessCheck:   true,
		ControllerName:         "webhook-cert-rotator",
	}); err != nil {
		return fmt.Errorf("webhook certificates: %w", err)
	}
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	return mgr.Add(&secretWatch{certs: c, client: cs})
}

// ReadyCheck is a readiness check (healthz.Checker): ready once the
// certificate is served and the CA injected into the configurations.
func (c *Certs) ReadyCheck(*http.Request) error {
	if c.served.Load() == nil {
		return fmt.Errorf("no serving certificate yet (Secret %s)", c.opts.Secret)
	}
	select {
	case <-c.rotatorReady:
		return nil
	default:
		return errors.New("the CA is not injected into the webhook configurations yet")
	}
}

// load serves the Secret's certificate and writes it into CertDir. An
// empty or partial Secret (before cert-controller fills it) is skipped.
func (c *Certs) load(s *corev1.Secret) error {
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return nil
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return fmt.Errorf("the Secret %s holds no usable certificate: %w", c.opts.Secret, err)
	}
	if old := c.served.Load(); old != nil && string(old.Certificate[0]) == string(pair.Certificate[0]) {
		return nil
	}
	for name, data := range map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key} {
		if err := writeFileAtomic(filepath.Join(c.opts.CertDir, name), data); err != nil {
			return err
		}
	}
	c.served.Store(&pair)
	sum := sha256.Sum256(pair.Certificate[0])
	ctrl.Log.WithName("webhook-certs").Info("serving a new certificate", "secret", c.opts.Secret.String(),
		"sha256", hex.EncodeToString(sum[:]), "notAfter", pair.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// secretWatch follows the one Secret (a field selector on its name) and
// serves what it holds.
type secretWatch struct {
	certs  *Certs
	client kubernetes.Interface
}

// NeedLeaderElection is false: every replica serves.
func (*secretWatch) NeedLeaderElection() bool { return false }

func (w *secretWatch) Start(ctx context.Context) error {
	key := w.certs.opts.Secret
	lw := toolscache.NewFilteredListWatchFromClient(w.client.CoreV1().RESTClient(), "secrets", key.Namespace, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", key.Name).String()
	})
	inf := toolscache.NewSharedIndexInformer(lw, &corev1.Secret{}, 0, toolscache.Indexers{})
	log := ctrl.Log.WithName("webhook-certs")
	handle := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok {
			if err := w.certs.load(s); err != nil {
				log.Error(err, "keeping the certificate served so far")
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
	}); err != nil {
		return err
	}
	inf.Run(ctx.Done())
	return nil
}
