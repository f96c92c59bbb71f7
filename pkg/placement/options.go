package placement

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
)

// Options configure the placement components. Zero fields take the
// defaults DefaultOptions documents.
type Options struct {
	// Namespace is archway's own namespace, whose pods are never gated.
	Namespace string
	// GlobalPullSecret names a kubernetes.io/dockerconfigjson Secret whose
	// credentials apply to every pod, after the pod's and its service
	// account's, as a node's pull secret does. Empty: none.
	GlobalPullSecret types.NamespacedName
	// WebhookConfigurationName is the MutatingWebhookConfiguration whose
	// namespaceSelector the config controller keeps in sync.
	WebhookConfigurationName string

	// InspectionTries bounds the inspections of a pod's images before it is
	// released with the fallback architecture or unchanged; default 5.
	InspectionTries int
	// InspectionBackoff is the delay before the first retry, doubling after
	// each; default 4s (retries after 4s, 8s, 16s, 32s).
	InspectionBackoff time.Duration
	// InspectionMaxBackoff caps one delay; default 1m.
	InspectionMaxBackoff time.Duration
	// InspectionDeadline bounds the time from a pod's first failed
	// inspection to its release, whatever the tries left; default 2m.
	InspectionDeadline time.Duration
	// InspectionTimeout bounds one registry call; default 30s.
	InspectionTimeout time.Duration

	// InsecureRegistries are registry hosts reached over plain HTTP or
	// unverified TLS.
	InsecureRegistries []string
	// RegistriesConfPath is a registries.conf for mirrors; default
	// containers/image's system path.
	RegistriesConfPath string

	// DigestCacheTTL keeps an image digest's architectures; default 24h.
	DigestCacheTTL time.Duration
	// TagCacheTTL trusts a tag's digest before resolving it again with a
	// manifest HEAD; default 1m. Tags of containers with imagePullPolicy
	// Always are resolved again on every pod.
	TagCacheTTL time.Duration
	// CacheSize bounds the digest and tag caches (LRU); default 10,000.
	CacheSize int

	// Workers is how many gated pods are handled at once; default 16.
	Workers int
	// ImageParallelism is how many of one pod's images are inspected at
	// once; default 8.
	ImageParallelism int
	// ReleaseParallelism is how many pods are released at once when the
	// config is deleted; default 16.
	ReleaseParallelism int
}

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{
		WebhookConfigurationName: WebhookConfigurationName,
		InspectionTries:          5,
		InspectionBackoff:        4 * time.Second,
		InspectionMaxBackoff:     time.Minute,
		InspectionDeadline:       2 * time.Minute,
		InspectionTimeout:        30 * time.Second,
		DigestCacheTTL:           24 * time.Hour,
		TagCacheTTL:              time.Minute,
		CacheSize:                10000,
		Workers:                  16,
		ImageParallelism:         8,
		ReleaseParallelism:       16,
	}
}

// withDefaults fills zero fields from DefaultOptions.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.WebhookConfigurationName == "" {
		o.WebhookConfigurationName = d.WebhookConfigurationName
	}
	setDefault(&o.InspectionTries, d.InspectionTries)
	setDefault(&o.InspectionBackoff, d.InspectionBackoff)
	setDefault(&o.InspectionMaxBackoff, d.InspectionMaxBackoff)
	setDefault(&o.InspectionDeadline, d.InspectionDeadline)
	setDefault(&o.InspectionTimeout, d.InspectionTimeout)
	setDefault(&o.DigestCacheTTL, d.DigestCacheTTL)
	setDefault(&o.TagCacheTTL, d.TagCacheTTL)
	setDefault(&o.CacheSize, d.CacheSize)
	setDefault(&o.Workers, d.Workers)
	setDefault(&o.ImageParallelism, d.ImageParallelism)
	setDefault(&o.ReleaseParallelism, d.ReleaseParallelism)
	return o
}

func setDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// BindFlags adds the placement flags to fs, with o's values as defaults.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Namespace, "placement-namespace", o.Namespace, "archway's own namespace, never gated (default: $POD_NAMESPACE)")
	fs.Var(&namespacedNameValue{&o.GlobalPullSecret}, "placement-global-pull-secret", "namespace/name of a dockerconfigjson Secret used for every pod's image inspection, after the pod's own pull secrets")
	fs.StringVar(&o.WebhookConfigurationName, "placement-webhook-configuration", o.WebhookConfigurationName, "MutatingWebhookConfiguration whose namespaceSelector follows the ClusterPodPlacementConfig")
	fs.IntVar(&o.InspectionTries, "placement-inspection-tries", o.InspectionTries, "image inspections of a pod before it is released unchanged or on the fallback architecture")
	fs.DurationVar(&o.InspectionBackoff, "placement-inspection-backoff", o.InspectionBackoff, "delay before the first inspection retry; doubles after each")
	fs.DurationVar(&o.InspectionMaxBackoff, "placement-inspection-max-backoff", o.InspectionMaxBackoff, "longest delay between inspection retries")
	fs.DurationVar(&o.InspectionDeadline, "placement-inspection-deadline", o.InspectionDeadline, "longest time a pod is retried after its first failed inspection")
	fs.DurationVar(&o.InspectionTimeout, "placement-inspection-timeout", o.InspectionTimeout, "timeout of one registry call")
	fs.StringSliceVar(&o.InsecureRegistries, "placement-insecure-registries", o.InsecureRegistries, "registry hosts reached over plain HTTP or unverified TLS")
	fs.StringVar(&o.RegistriesConfPath, "placement-registries-conf", o.RegistriesConfPath, "registries.conf for mirrors and insecure registries")
	fs.DurationVar(&o.DigestCacheTTL, "placement-digest-cache-ttl", o.DigestCacheTTL, "how long an image digest's architectures are cached")
	fs.DurationVar(&o.TagCacheTTL, "placement-tag-cache-ttl", o.TagCacheTTL, "how long a tag's digest is trusted before a manifest HEAD re-resolves it")
	fs.IntVar(&o.CacheSize, "placement-cache-size", o.CacheSize, "entries in each of the digest and tag caches")
	fs.IntVar(&o.Workers, "placement-workers", o.Workers, "gated pods handled at once")
}

// namespacedNameValue is a pflag.Value for "namespace/name".
type namespacedNameValue struct{ nn *types.NamespacedName }

func (v *namespacedNameValue) String() string {
	if v.nn == nil || v.nn.Name == "" {
		return ""
	}
	return v.nn.String()
}

func (v *namespacedNameValue) Set(s string) error {
	if s == "" {
		*v.nn = types.NamespacedName{}
		return nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("want namespace/name, got %q", s)
	}
	*v.nn = types.NamespacedName{Namespace: ns, Name: name}
	return nil
}

func (v *namespacedNameValue) Type() string { return "namespace/name" }
