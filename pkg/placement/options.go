package placement

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/archway-build/archway/pkg/placement/registries"
)

// Options configure the placement components. Zero fields take the
// defaults DefaultOptions documents.
type Options struct {
	// Namespace is archway's own namespace, whose pods are never gated.
	Namespace string
	// GlobalPullSecret names a kubernetes.io/dockerconfigjson Secret whose
	// credentials apply to every pod, after the pod's and its service
	// account's, as a node's pull secret does. Empty: none, or on
	// OpenShift (the cluster serves image.config.openshift.io)
	// openshift-config/pull-secret, the one its nodes pull with.
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
	// MaxImagesPerPod bounds the unique images of one pod that are
	// inspected: a pod with more is released without inspection (to the
	// fallback architecture when one is configured), so that no pod holds
	// a worker for its image count; default 64.
	MaxImagesPerPod int
	// ReconcileTimeout bounds the inspection of one pod's images in one
	// reconcile: images not inspected by then fail it, and the pod is
	// retried (InspectionTries, InspectionDeadline) while the worker
	// serves other pods; default 45s (a registry call's InspectionTimeout
	// and more).
	ReconcileTimeout time.Duration

	// InsecureRegistries are registry hosts reached over plain HTTP or
	// unverified TLS.
	InsecureRegistries []string
	// RegistriesConfPath is a registries.conf file merged first into the
	// registry configuration; default none.
	RegistriesConfPath string
	// RegistriesConfigMap names the ConfigMap in Namespace whose key
	// registries.conf (containers-registries.conf(5), version 2) holds
	// mirrors, blocked and insecure registries; default
	// "archway-registries".
	RegistriesConfigMap string
	// RegistryCAConfigMap names the ConfigMap in Namespace of per-registry
	// CA bundles (keys "host" or "host..port"); default
	// "archway-registry-cas".
	RegistryCAConfigMap string
	// TrustedCAConfigMap names the ConfigMap in Namespace whose key
	// ca-bundle.crt is trusted for every registry; default
	// "archway-trusted-ca".
	TrustedCAConfigMap string
	// RegistriesDir is where the generated registry configuration is
	// written; default a new temporary directory.
	RegistriesDir string
	// Registries, when set, is the process's watch of the registry
	// configuration (SetupRegistries), shared with the Build controller;
	// nil: placement starts its own.
	Registries *registries.Store

	// DigestCacheTTL keeps an image digest's architectures; default 24h.
	DigestCacheTTL time.Duration
	// TagCacheTTL trusts a tag's digest before resolving it again with a
	// manifest HEAD; default 1m. Tags of containers with imagePullPolicy
	// Always are resolved again on every pod.
	TagCacheTTL time.Duration
	// CacheSize bounds the digest and tag caches (LRU); default 10,000.
	CacheSize int

	// Workers is how many gated pods are handled at once; default 32
	// (each mostly waits for its one pod update).
	Workers int
	// ImageParallelism is how many of one pod's images are inspected at
	// once; default 8.
	ImageParallelism int
	// ReleaseParallelism is how many pods are released at once when the
	// config is deleted; default 16.
	ReleaseParallelism int

	// HeartbeatInterval is how often the leading controller renews the
	// heartbeat lease; default 2s.
	HeartbeatInterval time.Duration
	// HeartbeatTTL is how long after its last renewal the webhook still
	// takes the heartbeat for a running controller; default 20s, longer
	// than a leader election takes after a crash, so gating goes on while
	// another replica takes over.
	HeartbeatTTL time.Duration
	// AdmissionWindow is how long a pod admitted while the heartbeat was
	// fresh may take to be stored: a controller told to stop releases the
	// gated pods, waits this long and releases again, so that a pod gated
	// just before the heartbeat ended is not left behind; default 3s, the
	// gate webhook's timeout.
	AdmissionWindow time.Duration
	// ReleaseOnStopTimeout bounds the release of the gated pods when the
	// controller stops; default 25s (within the manager's 30s graceful
	// shutdown).
	ReleaseOnStopTimeout time.Duration
	// HandoverTimeout is how long a leader stopped while the
	// ClusterPodPlacementConfig lives waits, after its manager stopped, for
	// another replica to take the heartbeat lease before it releases the
	// gated pods itself (Controller.Finish); default 10s, more than a
	// standby's leader election retry (2s, jittered up to 4.4s) and start.
	HandoverTimeout time.Duration

	// GateSweepInterval is how often the controller looks for pods that
	// carry the gate without the gated label (created while the webhook was
	// down or outside its namespaces) and labels them, which brings them into
	// its watch; default 1m. The webhook labels every pod it sees with the
	// gate, so a sweep usually finds nothing.
	GateSweepInterval time.Duration

	// SetLogVerbosity, when set, is called with the logr verbosity the
	// ClusterPodPlacementConfig asks for (Normal 0, Debug 1, Trace 2,
	// TraceAll 3; 0 when there is no config).
	SetLogVerbosity func(v int)
}

// The default names of the registry configuration's ConfigMaps.
const (
	DefaultRegistriesConfigMap = "archway-registries"
	DefaultRegistryCAConfigMap = "archway-registry-cas"
	DefaultTrustedCAConfigMap  = "archway-trusted-ca"
)

// DefaultOptions returns the defaults.
func DefaultOptions() Options {
	return Options{
		WebhookConfigurationName: WebhookConfigurationName,
		RegistriesConfigMap:      DefaultRegistriesConfigMap,
		RegistryCAConfigMap:      DefaultRegistryCAConfigMap,
		TrustedCAConfigMap:       DefaultTrustedCAConfigMap,
		InspectionTries:          5,
		InspectionBackoff:        4 * time.Second,
		InspectionMaxBackoff:     time.Minute,
		InspectionDeadline:       2 * time.Minute,
		InspectionTimeout:        30 * time.Second,
		MaxImagesPerPod:          64,
		ReconcileTimeout:         45 * time.Second,
		DigestCacheTTL:           24 * time.Hour,
		TagCacheTTL:              time.Minute,
		CacheSize:                10000,
		Workers:                  32,
		ImageParallelism:         8,
		ReleaseParallelism:       16,
		HeartbeatInterval:        2 * time.Second,
		HeartbeatTTL:             20 * time.Second,
		AdmissionWindow:          3 * time.Second,
		ReleaseOnStopTimeout:     25 * time.Second,
		HandoverTimeout:          10 * time.Second,
		GateSweepInterval:        time.Minute,
	}
}

// WithDefaults fills zero fields from DefaultOptions.
func (o Options) WithDefaults() Options {
	d := DefaultOptions()
	if o.WebhookConfigurationName == "" {
		o.WebhookConfigurationName = d.WebhookConfigurationName
	}
	for _, f := range []struct {
		v *string
		d string
	}{
		{&o.RegistriesConfigMap, d.RegistriesConfigMap}, {&o.RegistryCAConfigMap, d.RegistryCAConfigMap}, {&o.TrustedCAConfigMap, d.TrustedCAConfigMap},
	} {
		if *f.v == "" {
			*f.v = f.d
		}
	}
	setDefault(&o.InspectionTries, d.InspectionTries)
	setDefault(&o.InspectionBackoff, d.InspectionBackoff)
	setDefault(&o.InspectionMaxBackoff, d.InspectionMaxBackoff)
	setDefault(&o.InspectionDeadline, d.InspectionDeadline)
	setDefault(&o.InspectionTimeout, d.InspectionTimeout)
	setDefault(&o.MaxImagesPerPod, d.MaxImagesPerPod)
	setDefault(&o.ReconcileTimeout, d.ReconcileTimeout)
	setDefault(&o.DigestCacheTTL, d.DigestCacheTTL)
	setDefault(&o.TagCacheTTL, d.TagCacheTTL)
	setDefault(&o.CacheSize, d.CacheSize)
	setDefault(&o.Workers, d.Workers)
	setDefault(&o.ImageParallelism, d.ImageParallelism)
	setDefault(&o.ReleaseParallelism, d.ReleaseParallelism)
	setDefault(&o.HeartbeatInterval, d.HeartbeatInterval)
	setDefault(&o.HeartbeatTTL, d.HeartbeatTTL)
	setDefault(&o.AdmissionWindow, d.AdmissionWindow)
	setDefault(&o.ReleaseOnStopTimeout, d.ReleaseOnStopTimeout)
	setDefault(&o.HandoverTimeout, d.HandoverTimeout)
	setDefault(&o.GateSweepInterval, d.GateSweepInterval)
	return o
}

func setDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
