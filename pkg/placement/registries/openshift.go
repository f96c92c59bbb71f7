package registries

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1alpha1 "github.com/openshift/api/operator/v1alpha1"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"k8s.io/apimachinery/pkg/types"

	"github.com/archway-build/archway/pkg/registry"
)

// OpenShift's registry settings, as its nodes apply them: the
// machine-config operator writes ImageContentSourcePolicies and the
// cluster image config's blocked and insecure registries into each node's
// registries.conf, its allowed registries into policy.json (every other
// registry rejected), and the additionalTrustedCA ConfigMap and the
// internal registry's service CA into /etc/docker/certs.d.

const (
	// ImageConfigName is the one image.config.openshift.io object OpenShift
	// reads.
	ImageConfigName = "cluster"
	// OpenShiftConfigNamespace holds the ConfigMap the image config's
	// additionalTrustedCA names, and the global pull secret.
	OpenShiftConfigNamespace = "openshift-config"
	// ServiceCAKey is the key OpenShift's service CA operator fills in a
	// ConfigMap annotated ServiceCAInjectAnnotation: the CA that signs
	// every Service's serving certificate, the internal registry's among
	// them.
	ServiceCAKey = "service-ca.crt"
	// ServiceCAInjectAnnotation asks the service CA operator to fill a
	// ConfigMap's ServiceCAKey.
	ServiceCAInjectAnnotation = "service.beta.openshift.io/inject-cabundle"
)

// OpenShiftPullSecret is the global pull secret of an OpenShift cluster,
// which every node pulls with.
var OpenShiftPullSecret = types.NamespacedName{Namespace: OpenShiftConfigNamespace, Name: "pull-secret"}

// The sources of InputErrors from OpenShift's settings.
const (
	imageConfigSource  = "image.config.openshift.io/" + ImageConfigName
	additionalCASource = "the image config's additionalTrustedCA ConfigMap"
	serviceCASource    = "the service CA ConfigMap's " + ServiceCAKey
)

// contentSourcePolicySource names an ImageContentSourcePolicy in
// InputErrors.
const contentSourcePolicySource = "ImageContentSourcePolicy "

// checkContentSourcePolicies refuses a policy whose registries
// containers/image cannot load (its CRD checks nothing), naming it.
func checkContentSourcePolicies(policies []operatorv1alpha1.ImageContentSourcePolicy) error {
	for _, p := range policies {
		var conf sysregistriesv2.V2RegistriesConf
		for i, m := range p.Spec.RepositoryDigestMirrors {
			if err := checkScope(m.Source); err != nil {
				return &InputError{Source: contentSourcePolicySource + p.Name, Err: fmt.Errorf("spec.repositoryDigestMirrors[%d].source %q: %w", i, m.Source, err)}
			}
			for j, mirror := range m.Mirrors {
				if err := checkScope(mirror); err != nil || strings.HasPrefix(mirror, "*.") {
					return &InputError{Source: contentSourcePolicySource + p.Name, Err: fmt.Errorf("spec.repositoryDigestMirrors[%d].mirrors[%d] %q: write hostname[:port][/path], without tag or digest", i, j, mirror)}
				}
			}
		}
		for _, r := range ContentSourcePolicyRegistries([]operatorv1alpha1.ImageContentSourcePolicy{p}) {
			registry.MergeRegistry(&conf, r)
		}
		data, err := registry.EncodeConf(conf)
		if err == nil {
			err = registry.CheckConf(data)
		}
		if err != nil {
			return &InputError{Source: contentSourcePolicySource + p.Name, Err: fmt.Errorf("spec.repositoryDigestMirrors: %w (write repositories as host[:port][/path], without tag or digest)", err)}
		}
	}
	return nil
}

// ContentSourcePolicyRegistries translates ImageContentSourcePolicies as
// OpenShift's nodes get them: digest mirrors, like an ImageDigestMirrorSet
// without mirrorSourcePolicy (the source is tried after the mirrors).
// Policies are taken in name order, mirrors in the order listed.
func ContentSourcePolicyRegistries(policies []operatorv1alpha1.ImageContentSourcePolicy) []sysregistriesv2.Registry {
	policies = slices.Clone(policies)
	slices.SortFunc(policies, func(a, b operatorv1alpha1.ImageContentSourcePolicy) int { return strings.Compare(a.Name, b.Name) })
	var out []sysregistriesv2.Registry
	for _, p := range policies {
		for _, m := range p.Spec.RepositoryDigestMirrors {
			mirrors := make([]configv1.ImageMirror, 0, len(m.Mirrors))
			for _, mirror := range m.Mirrors {
				mirrors = append(mirrors, configv1.ImageMirror(mirror))
			}
			out = append(out, mirrored(m.Source, mirrors, configv1.AllowContactingSource, sysregistriesv2.MirrorByDigestOnly))
		}
	}
	return out
}

// imageConfigRegistries translates the image config's insecure and
// blocked registries into registries.conf entries, and returns its allowed
// registries. Both allowedRegistries and blockedRegistries set is an
// error, as OpenShift refuses it.
func imageConfigRegistries(img *configv1.Image) (regs []sysregistriesv2.Registry, allowed []string, err error) {
	if img == nil {
		return nil, nil, nil
	}
	src := img.Spec.RegistrySources
	if len(src.AllowedRegistries) > 0 && len(src.BlockedRegistries) > 0 {
		return nil, nil, errors.New("spec.registrySources sets both allowedRegistries and blockedRegistries, which OpenShift refuses too: keep one of them")
	}
	for _, list := range []struct {
		field  string
		scopes []string
	}{{"insecureRegistries", src.InsecureRegistries}, {"blockedRegistries", src.BlockedRegistries}, {"allowedRegistries", src.AllowedRegistries}} {
		for i, scope := range list.scopes {
			if err := checkScope(scope); err != nil {
				return nil, nil, fmt.Errorf("spec.registrySources.%s[%d] %q: %w", list.field, i, scope, err)
			}
		}
	}
	for _, scope := range src.InsecureRegistries {
		r := scopeRegistry(scope)
		r.Insecure = true
		regs = append(regs, r)
	}
	for _, scope := range src.BlockedRegistries {
		r := scopeRegistry(scope)
		r.Blocked = true
		regs = append(regs, r)
	}
	var conf sysregistriesv2.V2RegistriesConf
	for _, r := range regs {
		registry.MergeRegistry(&conf, r)
	}
	data, err := registry.EncodeConf(conf)
	if err == nil {
		err = registry.CheckConf(data)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("spec.registrySources: %w", err)
	}
	return regs, slices.Clone(src.AllowedRegistries), nil
}

// checkScope refuses what OpenShift's CRD refuses, in case an older CRD
// (or one without validation, as ImageContentSourcePolicy's) let it in: a
// scope is hostname[:port][/path] without tag or digest, or *.domain.
func checkScope(scope string) error {
	bad := errors.New("write hostname[:port][/path] or *.domain, without tag or digest")
	if domain, ok := strings.CutPrefix(scope, "*."); ok {
		if domain == "" || strings.ContainsAny(domain, "/:*@ \t") {
			return bad
		}
		return nil
	}
	if !strings.Contains(scope, "/") {
		if _, err := RegistryHost(strings.Replace(scope, ":", "..", 1)); err != nil || strings.Contains(scope, "..") {
			return bad
		}
		return nil
	}
	named, err := reference.ParseNormalizedNamed(scope)
	if err != nil || !reference.IsNameOnly(named) {
		return bad
	}
	return nil
}

// scopeRegistry is the registries.conf entry of a scope; a wildcard has no
// location of its own.
func scopeRegistry(scope string) sysregistriesv2.Registry {
	r := sysregistriesv2.Registry{Prefix: scope, Endpoint: sysregistriesv2.Endpoint{Location: scope}}
	if strings.HasPrefix(scope, "*.") {
		r.Location = ""
	}
	return r
}

// mergeCAs adds each host's bundle of more to into, after the one it has.
func mergeCAs(into, more map[string][]byte) map[string][]byte {
	if len(more) == 0 {
		return into
	}
	if into == nil {
		into = map[string][]byte{}
	}
	for host, bundle := range more {
		into[host] = append(slices.Clone(into[host]), bundle...)
	}
	return into
}

// internalRegistryCA is the service CA, trusted for the internal registry
// the image config's status names ("host:port").
func internalRegistryCA(img *configv1.Image, serviceCA string) (map[string][]byte, error) {
	if img == nil || img.Status.InternalRegistryHostname == "" || strings.TrimSpace(serviceCA) == "" {
		return nil, nil
	}
	host, err := RegistryHost(strings.Replace(img.Status.InternalRegistryHostname, ":", "..", 1))
	if err != nil {
		return nil, fmt.Errorf("status.internalRegistryHostname: %w", err)
	}
	bundle, err := parseBundle(serviceCA)
	if err != nil {
		return nil, &InputError{Source: serviceCASource, Err: err}
	}
	return map[string][]byte{host: bundle}, nil
}
