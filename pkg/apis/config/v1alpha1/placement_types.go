package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PlacementConfig configures arch-aware pod placement: the
// placement-webhook and pod-placement components. Every field is optional;
// zero values take the documented defaults.
type PlacementConfig struct {
	// globalPullSecret names a kubernetes.io/dockerconfigjson Secret whose
	// credentials are tried for every pod's images after the pod's own and
	// its service account's pull secrets, as a node's pull secret is.
	// Default: none.
	// +optional
	GlobalPullSecret *corev1.SecretReference `json:"globalPullSecret,omitempty"`

	// inspection bounds the retries of image inspection. Default: see
	// PlacementInspectionConfig.
	// +optional
	Inspection PlacementInspectionConfig `json:"inspection,omitempty"`

	// insecureRegistries are registry hosts ("host" or "host:port")
	// reached over plain HTTP or TLS without verification, by placement's
	// inspections and by build pods alike (build-controller passes them to
	// every build and manifest-list pod). Default: none.
	// +optional
	InsecureRegistries []string `json:"insecureRegistries,omitempty"`

	// registriesConfPath is a containers registries.conf file merged first
	// into the registry configuration (see registries). Default: none.
	// +optional
	RegistriesConfPath string `json:"registriesConfPath,omitempty"`

	// registries names the watched ConfigMaps, in archway's namespace, that
	// configure how image inspection reaches registries. Default: see
	// PlacementRegistriesConfig.
	// +optional
	Registries PlacementRegistriesConfig `json:"registries,omitempty"`

	// cache sizes the image inspection cache. Default: see
	// PlacementCacheConfig.
	// +optional
	Cache PlacementCacheConfig `json:"cache,omitempty"`

	// workers is how many gated pods the controller handles at once.
	// Default: 32.
	// +optional
	Workers int32 `json:"workers,omitempty"`
}

// PlacementInspectionConfig bounds image inspection: a pod whose images
// cannot be inspected is retried with exponentially growing delays, then
// released on the fallback architecture or unchanged.
type PlacementInspectionConfig struct {
	// tries is the number of inspections before a pod is released.
	// Default: 5.
	// +optional
	Tries int32 `json:"tries,omitempty"`

	// backoff is the delay before the first retry; each next delay doubles.
	// Default: 4s.
	// +optional
	Backoff *metav1.Duration `json:"backoff,omitempty"`

	// maxBackoff caps one delay. Default: 1m.
	// +optional
	MaxBackoff *metav1.Duration `json:"maxBackoff,omitempty"`

	// deadline bounds the time from a pod's first failed inspection to its
	// release, whatever tries are left. Default: 2m.
	// +optional
	Deadline *metav1.Duration `json:"deadline,omitempty"`

	// timeout bounds one registry call. Default: 30s.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// maxImagesPerPod bounds the unique images of one pod that are
	// inspected: a pod with more is released without inspection (to the
	// fallback architecture when one is configured) with an
	// ArchAwareInspectionError event saying so. Default: 64.
	// +optional
	MaxImagesPerPod int32 `json:"maxImagesPerPod,omitempty"`

	// reconcileTimeout bounds the inspection of one pod's images in one
	// reconcile: images not inspected by then fail that try, and the pod
	// is retried (tries, deadline) while the worker serves other pods.
	// Default: 45s.
	// +optional
	ReconcileTimeout *metav1.Duration `json:"reconcileTimeout,omitempty"`
}

// PlacementRegistriesConfig names the ConfigMaps of the registry
// configuration, all in archway's namespace and watched: a change applies
// to the next image inspection. A ConfigMap that does not exist
// configures nothing.
type PlacementRegistriesConfig struct {
	// configMap holds, under the key registries.conf, a
	// containers-registries.conf(5) version 2: mirrors, blocked and
	// insecure registries. Default: archway-registries.
	// +optional
	ConfigMap string `json:"configMap,omitempty"`

	// registryCAConfigMap holds one PEM CA bundle per registry, keyed by
	// its host, with ".." for the ":" before a port
	// (registry.example.com..5000). Default: archway-registry-cas.
	// +optional
	RegistryCAConfigMap string `json:"registryCAConfigMap,omitempty"`

	// trustedCAConfigMap holds, under the key ca-bundle.crt, a PEM CA
	// bundle trusted for every registry. Default: archway-trusted-ca.
	// +optional
	TrustedCAConfigMap string `json:"trustedCAConfigMap,omitempty"`
}

// PlacementCacheConfig sizes the image inspection cache.
type PlacementCacheConfig struct {
	// digestTTL is how long the architectures of an image digest are kept
	// (digests name immutable content). Default: 24h.
	// +optional
	DigestTTL *metav1.Duration `json:"digestTTL,omitempty"`

	// tagTTL is how long a tag's digest is trusted before one manifest HEAD
	// resolves it again. Tags of containers with imagePullPolicy Always are
	// resolved again for every pod. Default: 1m.
	// +optional
	TagTTL *metav1.Duration `json:"tagTTL,omitempty"`

	// size bounds the digest and the tag caches, least recently used
	// entries leaving first. Default: 10000.
	// +optional
	Size int32 `json:"size,omitempty"`
}

func validatePlacement(p *PlacementConfig, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref := p.GlobalPullSecret; ref != nil {
		rp := path.Child("globalPullSecret")
		for _, msg := range validation.IsDNS1123Label(ref.Namespace) {
			errs = append(errs, field.Invalid(rp.Child("namespace"), ref.Namespace, msg))
		}
		for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
			errs = append(errs, field.Invalid(rp.Child("name"), ref.Name, msg))
		}
	}
	nonNegative := func(v int32, p *field.Path) {
		if v < 0 {
			errs = append(errs, field.Invalid(p, v, "must not be negative (0 takes the default)"))
		}
	}
	positive := func(d *metav1.Duration, p *field.Path) {
		if d != nil && d.Duration <= 0 {
			errs = append(errs, field.Invalid(p, d.Duration.String(), "must be a positive duration"))
		}
	}
	ip := path.Child("inspection")
	nonNegative(p.Inspection.Tries, ip.Child("tries"))
	positive(p.Inspection.Backoff, ip.Child("backoff"))
	positive(p.Inspection.MaxBackoff, ip.Child("maxBackoff"))
	positive(p.Inspection.Deadline, ip.Child("deadline"))
	positive(p.Inspection.Timeout, ip.Child("timeout"))
	nonNegative(p.Inspection.MaxImagesPerPod, ip.Child("maxImagesPerPod"))
	positive(p.Inspection.ReconcileTimeout, ip.Child("reconcileTimeout"))
	cp := path.Child("cache")
	positive(p.Cache.DigestTTL, cp.Child("digestTTL"))
	positive(p.Cache.TagTTL, cp.Child("tagTTL"))
	nonNegative(p.Cache.Size, cp.Child("size"))
	nonNegative(p.Workers, path.Child("workers"))
	rp := path.Child("registries")
	for _, f := range []struct {
		name, value string
	}{{"configMap", p.Registries.ConfigMap}, {"registryCAConfigMap", p.Registries.RegistryCAConfigMap}, {"trustedCAConfigMap", p.Registries.TrustedCAConfigMap}} {
		if f.value == "" {
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(f.value) {
			errs = append(errs, field.Invalid(rp.Child(f.name), f.value, msg))
		}
	}
	for i, host := range p.InsecureRegistries {
		if host == "" {
			errs = append(errs, field.Required(path.Child("insecureRegistries").Index(i), "a registry host"))
		}
	}
	return errs
}
