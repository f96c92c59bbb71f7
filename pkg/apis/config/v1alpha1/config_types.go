package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// GroupVersion is the apiVersion of build-controller's configuration file.
var GroupVersion = schema.GroupVersion{Group: "config.archway.dev", Version: "v1alpha1"}

// Kind is the kind of build-controller's configuration file.
const Kind = "BuildControllerConfiguration"

// BuildControllerConfiguration is the whole configuration file of
// build-controller. Every section is optional; a missing file section takes
// its defaults.
type BuildControllerConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// build configures the Build controller: the builder image and the
	// defaults and overrides applied to every build. Default: see
	// BuildControllerConfig.
	// +optional
	Build BuildControllerConfig `json:"build,omitempty"`

	// placement configures arch-aware pod placement. Default: see
	// PlacementConfig.
	// +optional
	Placement PlacementConfig `json:"placement,omitempty"`
}

// BuildControllerConfig configures the Build controller.
type BuildControllerConfig struct {
	// builderImage is the image every build pod runs (it holds the builder
	// program, cmd/builder). Required.
	BuilderImage string `json:"builderImage"`

	// platformBuilderImages replace builderImage for the build pods of
	// some platforms (for example a builder image published for only some
	// architectures, or a test image). The manifest-list pod always runs
	// builderImage. Default: none. Platforms must be unique once
	// normalized.
	// +optional
	PlatformBuilderImages []PlatformBuilderImage `json:"platformBuilderImages,omitempty"`

	// builderServiceAccount is the service account of build pods whose
	// Build names none in spec.serviceAccount. build-controller creates it
	// in every namespace that runs builds, with a RoleBinding named
	// archway-builder to the ClusterRole archway-builder (as OpenShift's
	// controllers create "builder"). Default: "builder"; "default" (the
	// service account of every other pod) is refused.
	// +optional
	BuilderServiceAccount string `json:"builderServiceAccount,omitempty"`

	// podSecurity is how build pods are isolated from their node.
	// "Unprivileged" (the default) runs them in a user namespace
	// (hostUsers: false), not privileged, with seccomp RuntimeDefault,
	// all capabilities dropped but the few buildah needs, and no privilege
	// escalation beyond them; the cluster needs user-namespace support
	// (docs/admin-guide/build-pod-security.md). "Privileged" runs them
	// privileged in the host's user namespace, as before: build-controller
	// logs a warning at start, and every build pod carries the annotation
	// build.archway.dev/pod-security: Privileged for audits.
	// +optional
	// +kubebuilder:validation:Enum=Unprivileged;Privileged
	PodSecurity PodSecurity `json:"podSecurity,omitempty"`

	// activeDeadlineSeconds bounds a build pod's run when the Build sets
	// no spec.completionDeadlineSeconds. Default: 14400 (4 hours); at
	// least 1.
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// workDirSizeLimit and storageSizeLimit cap the build pods' emptyDirs:
	// the build's scratch directory (source, context) and its image
	// store. A pod that writes more is evicted. Defaults: 10Gi and 40Gi.
	// +optional
	WorkDirSizeLimit *resource.Quantity `json:"workDirSizeLimit,omitempty"`
	// +optional
	StorageSizeLimit *resource.Quantity `json:"storageSizeLimit,omitempty"`

	// buildDefaults are applied to a build where the build does not say
	// otherwise. Default: none.
	// +optional
	BuildDefaults BuildDefaultsConfig `json:"buildDefaults,omitempty"`

	// buildOverrides are applied to every build, replacing what the build
	// says. Default: none.
	// +optional
	BuildOverrides BuildOverridesConfig `json:"buildOverrides,omitempty"`

	// emulation lists the platforms that may be built under emulation
	// (qemu user-mode, through the kernel's binfmt_misc) on nodes of
	// another architecture when no Ready schedulable node of their own
	// can build them. A platform not listed fails as before
	// (NodePlatformNotFound). Default: none.
	// +optional
	Emulation EmulationConfig `json:"emulation,omitempty"`

	// allowFileGitURIs lets Git sources name local repositories (file://
	// URLs and paths), which the builder reads inside the build pod, outside
	// the build's chroot: for test clusters that serve repositories from a
	// directory. Default: false (only http, https, ssh and git URLs; the
	// file transport is off for submodules too).
	// +optional
	AllowFileGitURIs bool `json:"allowFileGitURIs,omitempty"`

	// layerCache is the layer cache of Docker builds whose strategy sets
	// no layerCache.mode. Default: mode Disabled.
	// +optional
	LayerCache LayerCacheConfig `json:"layerCache,omitempty"`

	// unfitNodes marks, by a node label, the nodes no build pod may run on
	// (for example nodes whose container runtime ignores user namespaces).
	// Every build pod requires, in each of its required node affinity
	// terms, that the node not have the label (or, with values, not one
	// of those values), added after the Build's nodeSelector and the
	// build defaults and overrides; build-controller deletes a pod that
	// admission (a scheduling policy, a webhook) left without it or bound
	// to a node, and fails its platform. Default: none.
	// +optional
	UnfitNodes *UnfitNodesConfig `json:"unfitNodes,omitempty"`

	// trustedCA is the cluster's trusted CA bundle, which the RUN steps of
	// a Build with spec.mountTrustedCA: true read at the system trust
	// paths (never written into the image): a ConfigMap of this name in
	// the Build's namespace, as OpenShift's ConfigMaps labelled
	// config.openshift.io/inject-trusted-cabundle=true hold it. Default:
	// unset; a Build with mountTrustedCA: true then fails with the reason
	// MissingTrustedCABundle.
	// +optional
	TrustedCA *TrustedCAConfig `json:"trustedCA,omitempty"`

	// imageChangeTrigger configures the ImageChange triggers of
	// BuildConfigs. Default: see ImageChangeTriggerConfig.
	// +optional
	ImageChangeTrigger ImageChangeTriggerConfig `json:"imageChangeTrigger,omitempty"`
}

// ImageChangeTriggerConfig configures the ImageChange triggers, which poll
// the registries of the images they watch.
type ImageChangeTriggerConfig struct {
	// pollInterval is the time between two resolutions of a BuildConfig's
	// watched images (one manifest HEAD per image, with the build's
	// credentials). A new digest is seen at most this long after it is
	// pushed. Default: 5m; at least 1s.
	// +optional
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`
}

// TrustedCAConfig names the ConfigMap holding the cluster's trusted CA
// bundle in every namespace that runs builds with mountTrustedCA.
type TrustedCAConfig struct {
	// configMapName is the ConfigMap's name. Required.
	ConfigMapName string `json:"configMapName"`

	// key is the ConfigMap's key holding the PEM bundle. Default:
	// ca-bundle.crt (the key OpenShift injects).
	// +optional
	Key string `json:"key,omitempty"`
}

// UnfitNodesConfig names the node label that marks nodes unfit for builds.
type UnfitNodesConfig struct {
	// labelKey is the node label's key. Required.
	LabelKey string `json:"labelKey"`

	// values, when set, are the label values that make a node unfit (a
	// NotIn requirement); a node with another value, or without the
	// label, may run builds. Default: none (any value makes a node unfit:
	// a DoesNotExist requirement).
	// +optional
	Values []string `json:"values,omitempty"`
}

// LayerCacheConfig is the default layer cache of Docker builds.
type LayerCacheConfig struct {
	// mode is Registry or Disabled. With Registry, a build keeps its steps
	// in a repository per platform next to its output,
	// <output repository>-cache-<os>-<arch>[-<variant>], written with its
	// push secret, unless its strategy's layerCache names another
	// repository: a cache is never shared between outputs unless a build
	// says so. Default: Disabled.
	// +optional
	// +kubebuilder:validation:Enum=Registry;Disabled
	Mode buildv1.LayerCacheMode `json:"mode,omitempty"`
}

// EmulationConfig says which platforms may be built under emulation.
type EmulationConfig struct {
	// platforms are the platforms that may be built under emulation, each
	// with the architectures of the nodes that may emulate it. Default:
	// none. Platforms must be unique once normalized.
	// +optional
	Platforms []EmulatedPlatform `json:"platforms,omitempty"`
}

// EmulatedPlatform lets one platform be built under emulation.
type EmulatedPlatform struct {
	// platform is "os/arch" or "os/arch/variant", e.g. linux/arm/v7.
	// Only linux platforms can be emulated. Required.
	Platform string `json:"platform"`

	// hostArchitectures are the architectures (kubernetes.io/arch values)
	// of the nodes that may build the platform under emulation, most
	// preferred first: a Build's pod goes to the first of them that has a
	// Ready schedulable node labelled
	// emulation.archway.dev/<platform's architecture>=true (set by the
	// binfmt DaemonSet once it has registered the qemu handler). Required,
	// at least one, none the platform's own architecture.
	HostArchitectures []string `json:"hostArchitectures"`

	// onRequest makes the platform emulated only for Builds that ask for
	// it by name in their build.openshift.io/emulation annotation. Default:
	// false (every Build that needs it, unless its annotation says
	// otherwise).
	// +optional
	OnRequest bool `json:"onRequest,omitempty"`
}

// PodSecurity is how build pods are isolated from their node.
type PodSecurity string

// The values of build.podSecurity.
const (
	// PodSecurityUnprivileged runs build pods in a user namespace, not
	// privileged.
	PodSecurityUnprivileged PodSecurity = "Unprivileged"
	// PodSecurityPrivileged runs build pods privileged in the host's user
	// namespace: an explicit opt-in.
	PodSecurityPrivileged PodSecurity = "Privileged"
)

// PlatformBuilderImage is the builder image of one platform's build pods.
type PlatformBuilderImage struct {
	// platform is "os/arch" or "os/arch/variant", e.g. linux/s390x.
	// Required.
	Platform string `json:"platform"`

	// image is the builder image for that platform. Required.
	Image string `json:"image"`
}

// BuildDefaultsConfig holds values a build gets when it does not set them,
// as OpenShift's openshiftcontrolplane/v1 BuildDefaultsConfig, plus
// platforms.
type BuildDefaultsConfig struct {
	// env are environment variables added to the build's strategy
	// environment (spec.strategy.dockerStrategy.env) unless the build sets
	// a variable of that name. Default: none.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// labels are added to every build pod unless the pod already has the
	// label. Default: none.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to every build pod unless the pod already has
	// the annotation. Default: none.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// nodeSelector is the build pods' node selector when the build's own
	// spec.nodeSelector is null or holds only kubernetes.io/os (an empty
	// map on the build means "no selector" and keeps the default away), as
	// in OpenShift. Default: none.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// resources fill in the requests and limits the build's
	// spec.resources does not set, resource by resource. Default: none.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// imageLabels are added to the built image unless the build sets a
	// label of that name in spec.output.imageLabels. Default: none.
	// +optional
	ImageLabels []buildv1.ImageLabel `json:"imageLabels,omitempty"`

	// platforms are the target platforms of a build whose spec.platforms
	// is empty. Default: none, meaning the platforms of the cluster's
	// Ready, schedulable linux nodes that the build's pods could run on.
	// Each "os/arch" or "os/arch/variant"; unique once normalized.
	// +optional
	Platforms []string `json:"platforms,omitempty"`
}

// BuildOverridesConfig holds values forced on every build, as OpenShift's
// openshiftcontrolplane/v1 BuildOverridesConfig, plus labels and the
// multi-architecture additions platforms, archNodeSelector and
// manifestList.
type BuildOverridesConfig struct {
	// forcePull makes every build pull its base images even when present.
	// Default: false.
	// +optional
	ForcePull bool `json:"forcePull,omitempty"`

	// imageLabels are set on the built image, replacing the build's labels
	// of the same name. Default: none.
	// +optional
	ImageLabels []buildv1.ImageLabel `json:"imageLabels,omitempty"`

	// nodeSelector keys are set on every build pod's node selector,
	// replacing the build's values, except kubernetes.io/os, which an
	// override never changes (as in OpenShift). A platform pod's
	// kubernetes.io/arch always comes from its platform. Default: none.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations replace the tolerations of every build pod. Default:
	// none.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// annotations are set on every build pod, replacing values of the same
	// key. Default: none.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// labels are set on every build pod, replacing values of the same key.
	// archway's own labels (openshift.io/build.name,
	// build.openshift.io/platform, build.openshift.io/pod-role) cannot be
	// overridden. Default: none.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// platforms, when set, are the target platforms of every build,
	// whatever its spec.platforms says. Default: none. Each "os/arch" or
	// "os/arch/variant"; unique once normalized.
	// +optional
	Platforms []string `json:"platforms,omitempty"`

	// archNodeSelector adds kubernetes.io/os and kubernetes.io/arch of its
	// platform to each platform pod's node selector. With false, platform
	// pods may run on any node (for clusters that build foreign
	// architectures under emulation), and the controller neither checks
	// that a node exists for each platform nor that the build's node
	// selector agrees with the platforms. Default: true.
	// +optional
	ArchNodeSelector *bool `json:"archNodeSelector,omitempty"`

	// manifestList makes a multi-platform build with an output push a
	// manifest list to spec.output.to from a last pod, once the platform
	// pods are done. With false, each platform's image stays at its own
	// tag (the output tag with a platform suffix) and no manifest list is
	// pushed. Default: true.
	// +optional
	ManifestList *bool `json:"manifestList,omitempty"`
}
