package registries

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"
)

// TrustedCAKey is the key of the trusted CA ConfigMap holding the PEM
// bundle trusted for every registry: the key OpenShift's CA injection
// (label config.openshift.io/inject-trusted-cabundle) fills.
const TrustedCAKey = "ca-bundle.crt"

// ParseRegistryCAs reads a per-registry CA ConfigMap's data: each key is a
// registry host, with ".." standing for the ":" before a port
// ("registry.example.com..5000"; ConfigMap keys cannot hold ":"), as
// OpenShift's image.config additionalTrustedCA has them; each value is a
// PEM bundle of at least one certificate. The result is keyed "host" or
// "host:port".
func ParseRegistryCAs(data map[string]string) (map[string][]byte, error) {
	if len(data) == 0 {
		return nil, nil
	}
	out := make(map[string][]byte, len(data))
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		host, err := RegistryHost(key)
		if err != nil {
			return nil, err
		}
		if _, dup := out[host]; dup {
			return nil, fmt.Errorf("key %q: registry %s has two keys", key, host)
		}
		bundle, err := parseBundle(data[key])
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key, err)
		}
		out[host] = bundle
	}
	return out, nil
}

// RegistryHost turns a per-registry CA key into "host" or "host:port",
// refusing anything that is not a registry host (a path, a second port, a
// name a directory could not be made of).
func RegistryHost(key string) (string, error) {
	host := strings.Replace(key, "..", ":", 1)
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("key %q is not a registry host (%s): write registry.example.com, or registry.example.com..5000 for a port", key, why)
	}
	if host == "" || strings.ContainsAny(host, "/@") || strings.Contains(host, "..") {
		return bad("empty, or holds '/', '@' or more than one '..'")
	}
	named, err := reference.ParseNormalizedNamed(host + "/x")
	if err != nil || reference.Domain(named) != host {
		return bad("not a host name or address")
	}
	if strings.HasPrefix(host, ".") || strings.HasSuffix(host, ".") || strings.HasSuffix(host, ":") {
		return bad("a leading or trailing dot or colon")
	}
	return host, nil
}

// parseBundle checks that text is PEM holding certificates only, at least
// one, each of which parses; it returns the bundle re-encoded.
func parseBundle(text string) ([]byte, error) {
	rest := []byte(text)
	var out []byte
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("holds a %q PEM block; only CERTIFICATE blocks belong in a CA bundle", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return nil, fmt.Errorf("a certificate does not parse: %w", err)
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: block.Bytes})...)
	}
	if strings.TrimSpace(string(rest)) != "" {
		return nil, errors.New("holds text that is not PEM")
	}
	if len(out) == 0 {
		return nil, errors.New("holds no PEM certificate")
	}
	return out, nil
}
