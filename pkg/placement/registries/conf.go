package registries

import (
	"errors"
	"sort"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1alpha1 "github.com/openshift/api/operator/v1alpha1"
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
	// ContentSourcePolicies are OpenShift's ImageContentSourcePolicies:
	// digest mirrors, merged after the digest mirror sets.
	ContentSourcePolicies []operatorv1alpha1.ImageContentSourcePolicy
	// ImageConfig is OpenShift's image.config.openshift.io "cluster": its
	// registrySources' insecure, blocked and allowed registries, and the
	// internal registry its status names (trusted with ServiceCA); nil:
	// none.
	ImageConfig *configv1.Image
	// AdditionalTrustedCAs is the data of the ConfigMap the image config's
	// additionalTrustedCA names: per-registry CA bundles keyed as
	// RegistryCAs.
	AdditionalTrustedCAs map[string]string
	// ServiceCA is OpenShift's service CA bundle, trusted for the internal
	// registry.
	ServiceCA string
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
	// Allowed are the only registry scopes images may come from (the image
	// config's allowedRegistries): every other registry is blocked, mirrors
	// or not, as OpenShift's nodes reject it by policy.json. Nil: every
	// registry not blocked in Conf.
	Allowed []string
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
// prefix in the order Base, Conf, the insecure registries, the image
// config's insecure then blocked registries, the digest mirror sets, the
// ImageContentSourcePolicies, the tag mirror sets: a later source adds mirrors to an
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
	imageConfRegs, allowed, err := imageConfigRegistries(in.ImageConfig)
	if err != nil {
		return nil, &InputError{Source: imageConfigSource, Err: err}
	}
	for _, r := range imageConfRegs {
		registry.MergeRegistry(&conf, r)
	}
	for _, r := range DigestMirrorRegistries(in.DigestMirrorSets) {
		registry.MergeRegistry(&conf, r)
	}
	if err := checkContentSourcePolicies(in.ContentSourcePolicies); err != nil {
		return nil, err
	}
	for _, r := range ContentSourcePolicyRegistries(in.ContentSourcePolicies) {
		registry.MergeRegistry(&conf, r)
	}
	for _, r := range TagMirrorRegistries(in.TagMirrorSets) {
		registry.MergeRegistry(&conf, r)
	}
	registry.InheritScopes(&conf)
	sort.SliceStable(conf.Registries, func(i, j int) bool { return conf.Registries[i].Prefix < conf.Registries[j].Prefix })
	out := &Generated{Conf: conf, Allowed: allowed}
	if out.RegistryCAs, err = ParseRegistryCAs(in.RegistryCAs); err != nil {
		return nil, &InputError{Source: "the registry CA ConfigMap", Err: err}
	}
	additional, err := ParseRegistryCAs(in.AdditionalTrustedCAs)
	if err != nil {
		return nil, &InputError{Source: additionalCASource, Err: err}
	}
	out.RegistryCAs = mergeCAs(out.RegistryCAs, additional)
	internal, err := internalRegistryCA(in.ImageConfig, in.ServiceCA)
	var inErr *InputError
	switch {
	case errors.As(err, &inErr):
		return nil, inErr
	case err != nil:
		return nil, &InputError{Source: imageConfigSource, Err: err}
	}
	out.RegistryCAs = mergeCAs(out.RegistryCAs, internal)
	if strings.TrimSpace(in.TrustedCA) != "" {
		if out.TrustedCA, err = parseBundle(in.TrustedCA); err != nil {
			return nil, &InputError{Source: "the trusted CA ConfigMap's " + TrustedCAKey, Err: err}
		}
	}
	return out, nil
}
