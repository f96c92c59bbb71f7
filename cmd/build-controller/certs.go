package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"

	"github.com/archway-build/archway/pkg/webhookcert"
)

// The ways the webhook server gets its serving certificate.
const (
	// certInternal: build-controller makes, renews and injects it
	// (pkg/webhookcert, with open-policy-agent/cert-controller).
	certInternal = "internal"
	// certExternal: something else (cert-manager, OpenShift's service CA)
	// writes it into --webhook-cert-dir and injects the CA.
	certExternal = "external"
)

// certOptions are the flags of --cert-management=internal.
type certOptions struct {
	management    string
	secret        string
	service       string
	dnsNames      []string
	caValidity    time.Duration
	validity      time.Duration
	lookahead     time.Duration
	checkInterval time.Duration
}

func addCertFlags(f *pflag.FlagSet, o *certOptions) {
	f.StringVar(&o.management, "cert-management", certExternal,
		"how the webhook server gets its certificate: internal (build-controller makes it, keeps it in --webhook-cert-secret, renews it and injects its CA into the served components' webhook configurations) "+
			"or external (read from --webhook-cert-dir, made by e.g. cert-manager)")
	f.StringVar(&o.secret, "webhook-cert-secret", "", "with --cert-management=internal, the Secret in the pod's namespace that holds the CA and the serving certificate; it must exist (the manifests ship it empty)")
	f.StringVar(&o.service, "webhook-service", "", "with --cert-management=internal, the Service in the pod's namespace that reaches the webhook server: the certificate is for <service>.<namespace>.svc")
	f.StringSliceVar(&o.dnsNames, "webhook-cert-dns-names", nil, "with --cert-management=internal, more DNS names the certificate is for")
	f.DurationVar(&o.caValidity, "webhook-ca-validity", webhookcert.DefaultCAValidity, "with --cert-management=internal, how long a new CA is valid")
	f.DurationVar(&o.validity, "webhook-cert-validity", webhookcert.DefaultValidity, "with --cert-management=internal, how long a new serving certificate is valid")
	f.DurationVar(&o.lookahead, "webhook-cert-lookahead", webhookcert.DefaultLookahead, "with --cert-management=internal, the CA and the certificate are renewed when they would expire within this time")
	f.DurationVar(&o.checkInterval, "webhook-cert-check-interval", webhookcert.DefaultCheckInterval, "with --cert-management=internal, how often expiry is checked (changes of the Secret are seen at once)")
}

// webhookCerts returns the certificates of --cert-management=internal for
// the enabled components, or nil when the certificate is external or no
// component serves webhooks.
func webhookCerts(opts *options, enabled []component) (*webhookcert.Certs, error) {
	o := opts.certs
	switch o.management {
	case certExternal:
		return nil, nil
	case certInternal:
	default:
		return nil, fmt.Errorf("--cert-management=%q: use internal or external", o.management)
	}
	var configs []webhookcert.Configuration
	serves := false
	for _, c := range enabled {
		if c.webhooks != nil {
			serves = true
			configs = append(configs, c.webhooks()...)
		}
	}
	if !serves {
		return nil, nil
	}
	namespace := ownNamespace()
	certDir := opts.webhookCertDir
	if certDir == "" {
		dir, err := os.MkdirTemp("", "archway-webhook-certs-")
		if err != nil {
			return nil, fmt.Errorf("--cert-management=internal: a directory for the certificate: %w", err)
		}
		certDir = dir
	}
	var dnsNames []string
	if o.service != "" {
		dnsNames = webhookcert.ServiceDNSNames(o.service, namespace)
	}
	certs, err := webhookcert.New(webhookcert.Options{
		Secret:         types.NamespacedName{Namespace: namespace, Name: o.secret},
		DNSNames:       append(dnsNames, o.dnsNames...),
		Configurations: configs,
		CertDir:        certDir,
		CAValidity:     o.caValidity,
		Validity:       o.validity,
		Lookahead:      o.lookahead,
		CheckInterval:  o.checkInterval,
	})
	if err != nil {
		return nil, fmt.Errorf("--cert-management=internal (flags --webhook-cert-secret, --webhook-service, --webhook-ca-validity, --webhook-cert-validity, --webhook-cert-lookahead, --webhook-cert-check-interval): %w", err)
	}
	return certs, nil
}
