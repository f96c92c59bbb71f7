package registries

import (
	"sort"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"go.podman.io/image/v5/pkg/sysregistriesv2"

	"github.com/archway-build/archway/pkg/registry"
)

// RegistriesConfKey is the key of the registries ConfigMap holding a
// registries.conf (version 2, TOML).
const RegistriesConfKey = "registries.conf"

// Inputs are the sources of the registry configuration.
type Inputs struct {
	// Base is a registries.conf read from a file (the registriesConfPath
	// option), merged first; empty: none.
	Base string
	// Conf is the registries ConfigMap's registries.conf, merged after Base.
	Conf string
	// DigestMirrorSets and TagMirrorSets are OpenShift's mirror sets.
	DigestMirrorSets []configv1.ImageDigestMirrorSet
	TagMirrorSets    []configv1.ImageTagMirrorSet
	// InsecureRegistries are hosts (or prefixes) marked insecure.
	InsecureRegistries []string
	// RegistryCAs is the per-registry CA ConfigMap's data: keys
	// "host" or "host..port", values PEM bundles.
	RegistryCAs map[string]string
	// TrustedCA is a PEM bundle trusted for every registry.
	TrustedCA string
}

// Generated is what Build makes of Inputs.
type Generated struct {
	// Conf is the registries.conf (v2) to resolve with.
	Conf sysregistriesv2.V2RegistriesConf
	// RegistryCAs are the validated per-registry CA bundles by "host" or
	// "host:port", as a certificate directory names them.
	RegistryCAs map[string][]byte
	// TrustedCA is the validated global CA bundle, nil when none.
	TrustedCA []byte
}

// InputError is configuration that cannot be used; Source says where it
// was found, so that the message says what to fix.
type InputError struct {
	Source string
	Err    error
}

func (e *InputError) Error() string { return e.Source + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Build merges inputs into one configuration. Registries are merged by
// prefix in the order Base, Conf, the insecure registries, the digest
// mirror sets, the tag mirror sets: a later source adds mirrors to an
// earlier entry with the same prefix and may mark it insecure or blocked,
// never the reverse. Credential helpers are dropped: credentials come from
// the pods' pull secrets only. An input that cannot be used is an
// *InputError naming it.
func Build(in Inputs) (*Generated, error) {
	var conf sysregistriesv2.V2RegistriesConf
	for _, src := range []struct{ name, text string }{{"registriesConfPath", in.Base}, {"the registries ConfigMap's " + RegistriesConfKey, in.Conf}} {
		if strings.TrimSpace(src.text) == "" {
			continue
		}
		parsed, err := registry.ParseConf(src.text)
		if err != nil {
			return nil, &InputError{Source: src.name, Err: err}
		}
		for _, r := range parsed.Registries {
			registry.MergeRegistry(&conf, r)
		}
	}
	for _, host := range in.InsecureRegistries {
		if host == "" || host == "*" {
			continue // "*" is handled per request: it names no prefix
		}
		registry.MergeRegistry(&conf, sysregistriesv2.Registry{Prefix: host, Endpoint: sysregistriesv2.Endpoint{Location: host, Insecure: true}})
	}
	for _, r := range DigestMirrorRegistries(in.DigestMirrorSets) {
		registry.MergeRegistry(&conf, r)
	}
	for _, r := range TagMirrorRegistries(in.TagMirrorSets) {
		registry.MergeRegistry(&conf, r)
	}
	registry.InheritScopes(&conf)
	sort.SliceStable(conf.Registries, func(i, j int) bool { return conf.Registries[i].Prefix < conf.Registries[j].Prefix })
	out := &Generated{Conf: conf}
	var err error
	if out.RegistryCAs, err = ParseRegistryCAs(in.RegistryCAs); err != nil {
		return nil, &InputError{Source: "the registry CA ConfigMap", Err: err}
	}
	if strings.TrimSpace(in.TrustedCA) != "" {
		if out.TrustedCA, err = parseBundle(in.TrustedCA); err != nil {
			return nil, &InputError{Source: "the trusted CA ConfigMap's " + TrustedCAKey, Err: err}
		}
	}
	return out, nil
}
