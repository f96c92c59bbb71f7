package controller

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/build/imagestream"
	"github.com/archway-build/archway/pkg/platform"
)

// Names and paths inside build pods. The mount paths and the container name
// are OpenShift's, so a builder written for OpenShift finds its inputs.
const (
	// BuildContainerName is the container of a build pod (OpenShift's name
	// for Docker-strategy builds).
	BuildContainerName = "docker-build"
	// ManifestListContainerName is the container of the manifest-list pod.
	ManifestListContainerName = "manifest-list"

	// PushSecretMountPath is where spec.output.pushSecret is mounted; the
	// BUILD pod's PUSH_DOCKERCFG_PATH names it.
	PushSecretMountPath = "/var/run/secrets/openshift.io/push" //nolint:gosec // G101: a mount path, not a credential.
	// PullSecretMountPath is where dockerStrategy.pullSecret is mounted;
	// PULL_DOCKERCFG_PATH names it.
	PullSecretMountPath = "/var/run/secrets/openshift.io/pull" //nolint:gosec // G101: a mount path, not a credential.
	// AccountPullSecretsMountDir holds the build service account's image
	// pull secrets, one directory each; ACCOUNT_DOCKERCFG_PATH names it.
	AccountPullSecretsMountDir = "/var/run/secrets/openshift.io/account-pull" //nolint:gosec // G101: a mount path, not a credential.
	// SourceSecretMountPath is where source.sourceSecret is mounted;
	// SOURCE_SECRET_PATH names it.
	SourceSecretMountPath = "/var/run/secrets/openshift.io/source" //nolint:gosec // G101: a mount path, not a credential.
	// SourceSecretPathEnv names the directory of the mounted source secret.
	SourceSecretPathEnv = "SOURCE_SECRET_PATH"
	// InputSecretMountDir holds one directory per source.secrets entry,
	// named after the Secret.
	InputSecretMountDir = "/var/run/secrets/openshift.io/build" //nolint:gosec // G101: a mount path, not a credential.
	// InputConfigMapMountDir holds one directory per source.configMaps
	// entry, named after the ConfigMap.
	InputConfigMapMountDir = "/var/run/configs/openshift.io/build"
	// BuildVolumeMountDir holds one directory per dockerStrategy.volumes
	// entry, named after the volume; the builder mounts it into RUN steps
	// at the volume's destinationPath.
	BuildVolumeMountDir = "/var/run/openshift.io/volumes"
	// TrustedCAMountDir holds the cluster's trusted CA bundle, as the file
	// TrustedCABundleFile, in the pods of a Build with mountTrustedCA; the
	// builder mounts it into RUN steps at the system trust paths.
	TrustedCAMountDir = "/var/run/configs/openshift.io/pki"
	// TrustedCABundleFile is the bundle's file in TrustedCAMountDir.
	TrustedCABundleFile = "tls-ca-bundle.pem"
	// BuildWorkDir is the builder's scratch directory (an emptyDir).
	BuildWorkDir = "/tmp/build"
	// ContainerStorageDir is the builder's image store (an emptyDir).
	ContainerStorageDir = "/var/lib/containers/storage"

	// PodNameEnv, PodNamespaceEnv and PodUIDEnv hand the pod its own name,
	// namespace and UID (downward API); the builder waits for the UID to be
	// recorded in the Build before it writes the Build's status.
	PodNameEnv      = "POD_NAME"
	PodNamespaceEnv = "POD_NAMESPACE"
	PodUIDEnv       = "POD_UID"

	// AllowFileGitURIsFlag is the builder's flag that lets a Git source
	// name a local repository, passed when the configuration's
	// allowFileGitURIs is on.
	AllowFileGitURIsFlag = "allow-file-git-uris"
)

// BuildFailure reports why a Build cannot run at all, before any pod: an
// unsupported strategy or an output reference no pod can push to. It
// returns nil when the build can run.
func BuildFailure(b *buildv1.Build) *Failure {
	switch t := b.Spec.Strategy.Type; {
	case t != buildv1.DockerBuildStrategyType && t != buildv1.SourceBuildStrategyType:
		return &Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonUnsupportedBuildStrategy,
			Message: fmt.Sprintf("strategy %q is not supported: archway runs Docker and Source builds", t)}
	case t == buildv1.SourceBuildStrategyType && b.Spec.Strategy.SourceStrategy == nil:
		return &Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonUnsupportedBuildStrategy,
			Message: "strategy Source needs sourceStrategy (its builder image)"}
	}
	// The Reconciler resolves image stream references first; what is
	// left was not resolved.
	for _, r := range imagestream.SpecReferences(&b.Spec.CommonSpec) {
		if r.Field != imagestream.FieldOutputTo {
			return &Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonInvalidImageReference,
				Message: fmt.Sprintf("%s: kind %s was not resolved to an image", r.Field, r.Ref.Kind)}
		}
	}
	if to := b.Spec.Output.To; to != nil {
		if to.Kind != "DockerImage" {
			return &Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonInvalidOutputReference,
				Message: fmt.Sprintf("spec.output.to: kind %q is not supported: use DockerImage", to.Kind)}
		}
		// Any platform checks the reference: it must name a tag.
		if _, err := platform.Tag(to.Name, "linux/amd64"); err != nil {
			return &Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonInvalidOutputReference,
				Message: "spec.output.to: " + err.Error()}
		}
	}
	return nil
}

// PodPlan is what the pod-spec functions need besides the Build.
type PodPlan struct {
	// Config is the controller's build configuration (defaulted).
	Config *configv1alpha1.BuildControllerConfig
	// Platforms are the Build's resolved platforms; empty for a classic
	// build.
	Platforms []string
	// InsecureRegistries are passed to the builder of every pod
	// (--insecure-registry): plain-HTTP registries the build pulls from
	// or pushes to.
	InsecureRegistries []string
	// RegistriesConf is the cluster's registry configuration (a
	// registries.conf: mirrors, blocked and insecure registries), handed to
	// each build pod in $ARCHWAY_REGISTRIES_CONF. Default: none.
	RegistriesConf string
	// AllowedRegistries are the only registry scopes images may come from
	// (the image config's allowedRegistries), handed to each build pod in
	// $ARCHWAY_ALLOWED_REGISTRIES. Default: every registry.
	AllowedRegistries []string
	// RegistryCAs is a ConfigMap of registry CA certificates whose items
	// are certs.d/<host[:port]>/ca.crt (OpenShift's <build>-ca ConfigMap,
	// as its build controller mounts it), mounted into every build and
	// manifest-list pod at RegistryCAsMountDir, optionally (a pod starts
	// without it once it is gone), its certs.d named in
	// $ARCHWAY_REGISTRY_CERT_DIR. Default: none.
	RegistryCAs *corev1.ConfigMapVolumeSource
	// ClusterRegistryCAs are the cluster's per-registry CA bundles (PEM)
	// by "host" or "host:port": those placement trusts, OpenShift's image
	// config's additionalTrustedCA and the internal registry's service CA
	// among them (registries.Generated.RegistryCAs). When RegistryCAs is
	// nil, each is put in an annotation of every build and manifest-list
	// pod (RegistryCAAnnotationPrefix) and mounted from it with a projected
	// downward API volume at RegistryCAsMountDir, as certs.d/<host>/ca.crt: the
	// pod carries them itself, so no object is made in the Build's
	// namespace. Default: none.
	ClusterRegistryCAs map[string][]byte
	// AccountPullSecrets are the image pull secrets of the Build's service
	// account, mounted into its pods when it names no push or no pull
	// secret (AccountPullSecretsMountDir). Default: none.
	AccountPullSecrets []string
}

// insecureRegistryArgs are the builder's flags naming the insecure
// registries.
func (pl PodPlan) insecureRegistryArgs() []string {
	args := make([]string, 0, len(pl.InsecureRegistries))
	for _, r := range pl.InsecureRegistries {
		args = append(args, "--insecure-registry="+r)
	}
	return args
}

// RegistryCAsMountDir is where a build pod's RegistryCAs are mounted:
// where OpenShift's build controller mounts its build CA ConfigMap.
const RegistryCAsMountDir = "/var/run/configs/openshift.io/certs"

// RegistryCAAnnotationPrefix begins the annotations of a build pod that
// hold ClusterRegistryCAs, one per registry, numbered in host order.
const RegistryCAAnnotationPrefix = "registry-ca.build.archway.dev/"

// mountRegistryCAs mounts RegistryCAs, else ClusterRegistryCAs, into pod
// and names their certs.d.
func (pl PodPlan) mountRegistryCAs(pod *corev1.Pod) {
	var src corev1.VolumeSource
	switch {
	case pl.RegistryCAs != nil:
		src.ConfigMap = pl.RegistryCAs.DeepCopy()
		src.ConfigMap.Optional = ptr.To(true)
	case len(pl.ClusterRegistryCAs) > 0:
		// Projected: the volume type archway-build's SCC allows.
		src.Projected = &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{DownwardAPI: pl.annotateRegistryCAs(pod)}}}
	default:
		return
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "registry-cas", VolumeSource: src})
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "registry-cas", MountPath: RegistryCAsMountDir, ReadOnly: true})
	c.Env = append(c.Env, corev1.EnvVar{Name: buildv1.RegistryCertDirEnv, Value: RegistryCAsMountDir + "/certs.d"})
}

// annotateRegistryCAs puts each of ClusterRegistryCAs in an annotation of
// pod and returns the downward API projection that makes them
// certs.d/<host>/ca.crt.
func (pl PodPlan) annotateRegistryCAs(pod *corev1.Pod) *corev1.DownwardAPIProjection {
	hosts := slices.Sorted(maps.Keys(pl.ClusterRegistryCAs))
	src := &corev1.DownwardAPIProjection{}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	for i, host := range hosts {
		key := RegistryCAAnnotationPrefix + strconv.Itoa(i)
		pod.Annotations[key] = string(pl.ClusterRegistryCAs[host])
		src.Items = append(src.Items, corev1.DownwardAPIVolumeFile{
			Path:     "certs.d/" + host + "/ca.crt",
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + key + "']"},
		})
	}
	return src
}

// MaxAccountPullSecrets is the most of a service account's image pull
// secrets a build pod mounts.
const MaxAccountPullSecrets = 16

// usesAccountSecrets reports whether the Build pushes or pulls without a
// secret of its own: then the service account's image pull secrets are
// its credentials.
func usesAccountSecrets(b *buildv1.Build) bool {
	pushes := b.Spec.Output.To != nil && b.Spec.Output.PushSecret == nil
	return pushes || b.Spec.Strategy.StrategyPullSecret() == nil
}

// mountAccountSecrets mounts the service account's image pull secrets, the
// docker config of each (.dockerconfigjson or .dockercfg, whichever it has)
// in a directory of its own, numbered in the account's order.
func (pl PodPlan) mountAccountSecrets(pod *corev1.Pod, b *buildv1.Build) {
	if len(pl.AccountPullSecrets) == 0 || !usesAccountSecrets(b) {
		return
	}
	proj := &corev1.ProjectedVolumeSource{}
	for i, name := range pl.AccountPullSecrets {
		if i == MaxAccountPullSecrets {
			break
		}
		proj.Sources = append(proj.Sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: name},
			Items: []corev1.KeyToPath{
				{Key: corev1.DockerConfigJsonKey, Path: fmt.Sprintf("%d/%s", i, corev1.DockerConfigJsonKey)},
				{Key: corev1.DockerConfigKey, Path: fmt.Sprintf("%d/%s", i, corev1.DockerConfigKey)},
			},
			// A secret that is gone, or not a docker config, is left out.
			Optional: ptr.To(true),
		}})
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "account-pull-secrets", VolumeSource: corev1.VolumeSource{Projected: proj}})
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "account-pull-secrets", MountPath: AccountPullSecretsMountDir, ReadOnly: true})
	c.Env = append(c.Env, corev1.EnvVar{Name: buildv1.AccountDockerConfigPathEnv, Value: AccountPullSecretsMountDir})
}

func (pl PodPlan) archNodeSelector() bool {
	return ptr.Deref(pl.Config.BuildOverrides.ArchNodeSelector, true)
}

// ManifestList reports whether the build ends with a manifest-list pod: it
// has an output, more than one platform, and manifestList is not off.
func (pl PodPlan) ManifestList(b *buildv1.Build) bool {
	return len(pl.Platforms) > 1 && b.Spec.Output.To != nil && ptr.Deref(pl.Config.BuildOverrides.ManifestList, true)
}

// PlatformOutput is where a platform pod pushes: with more than one
// platform, the output tag with the platform's suffix in the same
// repository (platform.Tag), because the manifest list may only
// list images of its own repository; with one platform, the output itself.
// It returns "" for a build without output.
func (pl PodPlan) PlatformOutput(b *buildv1.Build, p string) (string, error) {
	if b.Spec.Output.To == nil {
		return "", nil
	}
	if len(pl.Platforms) <= 1 {
		return b.Spec.Output.To.Name, nil
	}
	return platform.Tag(b.Spec.Output.To.Name, p)
}

// NodeSelector is the build pods' node selector before any platform's
// os/arch: the build's own, with the configured default when the build's
// is null or holds only kubernetes.io/os (an empty map keeps the default
// away), then the configured overrides, which never change
// kubernetes.io/os.
func NodeSelector(b *buildv1.Build, cfg *configv1alpha1.BuildControllerConfig) map[string]string {
	own := b.Spec.NodeSelector
	sel := maps.Clone(map[string]string(own))
	if sel == nil {
		sel = map[string]string{}
	}
	_, hasOS := own[corev1.LabelOSStable]
	if own == nil || (len(own) == 1 && hasOS) {
		for k, v := range cfg.BuildDefaults.NodeSelector {
			if _, set := sel[k]; !set {
				sel[k] = v
			}
		}
	}
	for k, v := range cfg.BuildOverrides.NodeSelector {
		if k != corev1.LabelOSStable {
			sel[k] = v
		}
	}
	return sel
}

// Tolerations are the build pods' tolerations: the configured overrides
// replace whatever a pod would have had (none).
func Tolerations(cfg *configv1alpha1.BuildControllerConfig) []corev1.Toleration {
	return slices.Clone(cfg.BuildOverrides.Tolerations)
}

// PodBuild is the Build handed to a pod in BUILD: the Build with the
// configured defaults and overrides applied (strategy env, image labels,
// forcePull, service account), its status and managed fields left out, and
// platforms narrowed to what the pod does: the pod's own platform and
// output tag for a platform pod, every resolved platform for the
// manifest-list pod, none for a classic pod.
func (pl PodPlan) PodBuild(b *buildv1.Build, role, p string) (*buildv1.Build, error) {
	out := &buildv1.Build{
		TypeMeta:   metav1.TypeMeta{APIVersion: buildv1.GroupVersion.String(), Kind: "Build"},
		ObjectMeta: *b.ObjectMeta.DeepCopy(),
		Spec:       *b.Spec.DeepCopy(),
	}
	out.ManagedFields = nil
	cfg := pl.Config
	spec := &out.Spec
	if spec.ServiceAccount == "" {
		spec.ServiceAccount = cfg.BuilderServiceAccount
	}
	if ss := spec.Strategy.SourceStrategy; ss != nil {
		for _, env := range cfg.BuildDefaults.Env {
			if !slices.ContainsFunc(ss.Env, func(e corev1.EnvVar) bool { return e.Name == env.Name }) {
				ss.Env = append(ss.Env, env)
			}
		}
		if cfg.BuildOverrides.ForcePull {
			ss.ForcePull = true
		}
	} else if ds := spec.Strategy.DockerStrategy; ds != nil || len(cfg.BuildDefaults.Env) > 0 || cfg.BuildOverrides.ForcePull {
		if ds == nil {
			ds = &buildv1.DockerBuildStrategy{}
			spec.Strategy.DockerStrategy = ds
		}
		for _, env := range cfg.BuildDefaults.Env {
			if !slices.ContainsFunc(ds.Env, func(e corev1.EnvVar) bool { return e.Name == env.Name }) {
				ds.Env = append(ds.Env, env)
			}
		}
		if cfg.BuildOverrides.ForcePull {
			ds.ForcePull = true
		}
	}
	if ss := spec.Strategy.SourceStrategy; spec.Strategy.Type == buildv1.SourceBuildStrategyType && ss != nil {
		ss.LayerCache = ResolveLayerCache(ss.LayerCache, cfg.LayerCache)
	}
	if spec.Strategy.Type == buildv1.DockerBuildStrategyType {
		var own *buildv1.LayerCache
		squash := false
		if spec.Strategy.DockerStrategy != nil {
			own = spec.Strategy.DockerStrategy.LayerCache
			squash = spec.Strategy.DockerStrategy.ImageOptimizationPolicy.SkipsLayers()
		}
		// A squashed build keeps no layer per step: the configuration's
		// default cache does not apply (the CRD refuses a cache the build
		// asks for itself).
		if cache := ResolveLayerCache(own, cfg.LayerCache); cache != nil && !squash {
			if spec.Strategy.DockerStrategy == nil {
				spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{}
			}
			spec.Strategy.DockerStrategy.LayerCache = cache
		} else if own != nil {
			spec.Strategy.DockerStrategy.LayerCache = nil
		}
	}
	spec.Output.ImageLabels = mergeImageLabels(spec.Output.ImageLabels, cfg.BuildDefaults.ImageLabels, cfg.BuildOverrides.ImageLabels)
	delete(out.Annotations, buildv1.BinaryInputReaderAnnotation)
	delete(out.Annotations, buildv1.IncrementalFromAnnotation)
	switch role {
	case buildv1.PodRoleManifestList:
		spec.Platforms = slices.Clone(pl.Platforms)
	case buildv1.PodRoleBuild:
		if len(pl.Platforms) <= 1 && spec.Source.Binary != nil && spec.Source.Binary.Artifact != "" {
			// No manifest-list pod: the one build pod removes the input's
			// tag once it has read it.
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[buildv1.BinaryInputReaderAnnotation] = buildv1.BinaryInputOnlyReader
		}
		if p == "" {
			spec.Platforms, spec.PlatformsAllowedToFail = nil, nil
			break
		}
		spec.Platforms = []string{p}
		spec.PlatformsAllowedToFail = nil
		if ss := spec.Strategy.SourceStrategy; ss != nil && ptr.Deref(ss.Incremental, false) && spec.Output.To != nil {
			// The previous image is the index's child: the pod's own
			// output is its platform's tag, gone after each build.
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[buildv1.IncrementalFromAnnotation] = spec.Output.To.Name
		}
		if allowedToFail(b.Spec.PlatformsAllowedToFail, p) {
			spec.PlatformsAllowedToFail = []string{p}
		}
		tag, err := pl.PlatformOutput(b, p)
		if err != nil {
			return nil, err
		}
		if tag != "" {
			spec.Output.To.Name = tag
		}
	}
	return out, nil
}

// ValueFromEnv is how a strategy's env (and a Docker strategy's buildArgs) with a
// valueFrom (ConfigMap or Secret keys, or any other source of the
// Kubernetes EnvVarSource) reach the builder: as the build container's own
// environment variables with the same valueFrom, named by the entry's
// position (buildv1.StrategyEnvValueFromPrefix + i), so that the kubelet
// resolves them and build-controller never reads a Secret's value. A
// missing key that is not optional keeps the pod from starting, as for any
// pod.
func ValueFromEnv(s *buildv1.BuildStrategy) []corev1.EnvVar {
	var env []corev1.EnvVar
	add := func(prefix string, vars []corev1.EnvVar) {
		for i, v := range vars {
			if v.ValueFrom != nil {
				env = append(env, corev1.EnvVar{Name: fmt.Sprintf("%s%d", prefix, i), ValueFrom: v.ValueFrom.DeepCopy()})
			}
		}
	}
	add(buildv1.StrategyEnvValueFromPrefix, s.StrategyEnv())
	if ds := s.DockerStrategy; ds != nil {
		add(buildv1.StrategyBuildArgValueFromPrefix, ds.BuildArgs)
	}
	return env
}

// mergeImageLabels adds default labels the build does not set and sets
// override labels, replacing the build's of the same name.
func mergeImageLabels(own, defaults, overrides []buildv1.ImageLabel) []buildv1.ImageLabel {
	out := slices.Clone(own)
	has := func(name string) int {
		return slices.IndexFunc(out, func(l buildv1.ImageLabel) bool { return l.Name == name })
	}
	for _, l := range defaults {
		if has(l.Name) < 0 {
			out = append(out, l)
		}
	}
	for _, l := range overrides {
		if i := has(l.Name); i >= 0 {
			out[i] = l
		} else {
			out = append(out, l)
		}
	}
	return out
}

// allowedToFail reports whether p is in the allowed-to-fail list, compared
// in canonical form.
func allowedToFail(allowed []string, p string) bool {
	want, err := platform.Parse(p)
	if err != nil {
		return slices.Contains(allowed, p)
	}
	for _, a := range allowed {
		if ap, err := platform.Parse(a); err == nil && ap.Equal(want) {
			return true
		}
	}
	return false
}

// BuildPod is the pod that builds one platform of b (p = "" for a classic
// build): deterministic name, the Build as owner, archway's labels and
// annotations, the platform's node selector, defaults and overrides, the
// builder image (or the platform's override) running `builder
// docker-build`, the Build in BUILD, the secrets mounted where OpenShift
// mounts them, the build's resources and deadline.
func (pl PodPlan) BuildPod(b *buildv1.Build, p string) (*corev1.Pod, error) {
	cfg := pl.Config
	name, image := buildv1.ClassicPodName(b.Name), cfg.BuilderImage
	var pp platform.Platform
	if p != "" {
		var err error
		if pp, err = platform.Parse(p); err != nil {
			return nil, err
		}
		name = buildv1.PlatformPodName(b.Name, p)
		for _, o := range cfg.PlatformBuilderImages {
			if op, err := platform.Parse(o.Platform); err == nil && op.Equal(pp) {
				image = o.Image
			}
		}
	}
	podBuild, err := pl.PodBuild(b, buildv1.PodRoleBuild, p)
	if err != nil {
		return nil, err
	}
	pod, err := pl.basePod(b, name, buildv1.PodRoleBuild, podBuild)
	if err != nil {
		return nil, err
	}
	sel := NodeSelector(b, cfg)
	if p != "" {
		pod.Labels[buildv1.PlatformLabel] = pp.NameSuffix()
		pod.Annotations[buildv1.PlatformAnnotation] = p
		if pl.archNodeSelector() {
			if host := entryOf(b, p).EmulatedOn; host != "" {
				// Built under emulation: on a node of the host
				// architecture whose qemu handler for the platform's
				// is registered.
				maps.Copy(sel, EmulatedNodeSelector(pp, host))
			} else {
				maps.Copy(sel, pp.NodeSelector())
			}
		}
	}
	if _, ok := sel[corev1.LabelOSStable]; !ok {
		sel[corev1.LabelOSStable] = "linux"
	}
	pod.Spec.NodeSelector = sel
	excludeUnfitNodes(pod, UnfitNodeRequirement(cfg))
	pod.Spec.ActiveDeadlineSeconds = b.Spec.CompletionDeadlineSeconds
	if pod.Spec.ActiveDeadlineSeconds == nil {
		pod.Spec.ActiveDeadlineSeconds = cfg.ActiveDeadlineSeconds
	}
	c := &pod.Spec.Containers[0]
	c.Name = BuildContainerName
	c.Image = image
	c.Command = []string{"builder", "docker-build"}
	if pl.Config.AllowFileGitURIs {
		c.Command = append(c.Command, "--"+AllowFileGitURIsFlag)
	}
	c.Command = append(c.Command, pl.insecureRegistryArgs()...)
	c.Resources = resources(b.Spec.Resources, cfg.BuildDefaults.Resources)
	c.Env = append(c.Env, ValueFromEnv(&podBuild.Spec.Strategy)...)
	if pl.RegistriesConf != "" {
		c.Env = append(c.Env, corev1.EnvVar{Name: buildv1.RegistriesConfEnv, Value: pl.RegistriesConf})
	}
	if len(pl.AllowedRegistries) > 0 {
		c.Env = append(c.Env, corev1.EnvVar{Name: buildv1.AllowedRegistriesEnv, Value: strings.Join(pl.AllowedRegistries, ",")})
	}
	pl.secureBuildPod(pod)
	if ps := b.Spec.Strategy.StrategyPullSecret(); ps != nil {
		mountSecret(pod, "pull-secret", ps.Name, PullSecretMountPath)
		c.Env = append(c.Env, corev1.EnvVar{Name: buildv1.PullDockerConfigPathEnv, Value: PullSecretMountPath})
	}
	if s := b.Spec.Source.SourceSecret; s != nil {
		mountSecret(pod, "source-secret", s.Name, SourceSecretMountPath)
		c.Env = append(c.Env, corev1.EnvVar{Name: SourceSecretPathEnv, Value: SourceSecretMountPath})
	}
	for i, s := range b.Spec.Source.Secrets {
		mountSecret(pod, fmt.Sprintf("input-secret-%d", i), s.Secret.Name, InputSecretMountDir+"/"+s.Secret.Name)
	}
	for i, cm := range b.Spec.Source.ConfigMaps {
		vol := fmt.Sprintf("input-configmap-%d", i)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: cm.ConfigMap}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: InputConfigMapMountDir + "/" + cm.ConfigMap.Name, ReadOnly: true})
	}
	for i, v := range b.Spec.Strategy.StrategyVolumes() {
		vol := fmt.Sprintf("build-volume-%d", i)
		src := corev1.VolumeSource{Secret: v.Source.Secret, ConfigMap: v.Source.ConfigMap, CSI: v.Source.CSI}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: src})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: BuildVolumeMountDir + "/" + v.Name, ReadOnly: true})
	}
	if ca := cfg.TrustedCA; ca != nil && ptr.Deref(b.Spec.MountTrustedCA, false) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "trusted-ca", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: ca.ConfigMapName},
				Items:                []corev1.KeyToPath{{Key: ca.Key, Path: TrustedCABundleFile}},
			}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "trusted-ca", MountPath: TrustedCAMountDir, ReadOnly: true})
	}
	for _, d := range []struct {
		name, path string
		limit      *resource.Quantity
	}{{"buildworkdir", BuildWorkDir, cfg.WorkDirSizeLimit}, {"container-storage-root", ContainerStorageDir, cfg.StorageSizeLimit}} {
		var limit *resource.Quantity
		if d.limit != nil {
			limit = ptr.To(d.limit.DeepCopy())
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: d.name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: limit}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: d.name, MountPath: d.path})
	}
	return pod, nil
}

// PodSecurityAnnotation records on every build pod how it is isolated
// (build.podSecurity), so audits find privileged ones.
const PodSecurityAnnotation = "build.archway.dev/pod-security"

// BuildCapabilities are the only capabilities of an unprivileged build
// container, all in the pod's user namespace: the ones buildah gives each
// RUN step (its default list: CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL,
// NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT; a step
// fails with "setting capabilities: operation not permitted" when one is
// missing from the builder's own set), and SYS_ADMIN: buildah mounts an
// overlay over the build context and, for each RUN step under chroot
// isolation, unshares a mount and UTS namespace and bind-mounts the step's
// /proc, /sys and /dev (without it: "mounting an overlay over build context
// directory: ... operation not permitted"). SYS_ADMIN in a user namespace
// grants nothing over the host's mounts or devices.
var BuildCapabilities = []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "NET_BIND_SERVICE",
	"SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT", "SYS_ADMIN"}

// secureBuildPod sets the build pod's isolation from build.podSecurity:
// Unprivileged runs it in a user namespace of its own (hostUsers: false),
// with seccomp RuntimeDefault and only BuildCapabilities; Privileged, the
// explicit opt-in, runs it privileged in the host's user namespace.
func (pl PodPlan) secureBuildPod(pod *corev1.Pod) {
	c := &pod.Spec.Containers[0]
	mode := pl.Config.PodSecurity
	if mode == "" {
		mode = configv1alpha1.PodSecurityUnprivileged
	}
	pod.Annotations[PodSecurityAnnotation] = string(mode)
	if mode == configv1alpha1.PodSecurityPrivileged {
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		return
	}
	pod.Spec.HostUsers = ptr.To(false)
	// A runtime that ignores hostUsers: false would run the container's
	// root, with SYS_ADMIN, as the node's root: the builder checks.
	c.Command = append(c.Command, "--"+buildv1.RequireUserNamespaceFlag)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	c.SecurityContext = &corev1.SecurityContext{
		Privileged: ptr.To(false),
		// The builder writes only to its emptyDirs (work directory,
		// image store, TMPDIR under the work directory).
		ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{
			Drop: []corev1.Capability{"ALL"},
			Add:  slices.Clone(BuildCapabilities),
		},
	}
}

// RemoveTagsArg starts `builder manifest-list` in the pod that removes the
// per-platform tags of a Build that ended without a manifest list, once
// every platform pod has ended; without it the pod removes nothing from
// such a Build.
const RemoveTagsArg = "--remove-tags"

// RemoveTagsPod is the manifest-list pod that removes the per-platform tags
// of a Build that ended without a manifest list (see Cleanup).
func (pl PodPlan) RemoveTagsPod(b *buildv1.Build) (*corev1.Pod, error) {
	pod, err := pl.ManifestListPod(b)
	if err != nil {
		return nil, err
	}
	c := &pod.Spec.Containers[0]
	c.Command = append(c.Command, RemoveTagsArg)
	return pod, nil
}

// ManifestListPod is the pod of a multi-platform build with an output that
// pushes its manifest list. It is created with the platform pods and runs
// `builder manifest-list`, which waits for the platforms' entries, pushes
// the manifest list to spec.output.to and untags the per-platform images:
// its start overlaps the builds. Its wait is bounded as the platform pods
// are, by spec.completionDeadlineSeconds or else build.activeDeadlineSeconds.
// It runs on any linux node.
func (pl PodPlan) ManifestListPod(b *buildv1.Build) (*corev1.Pod, error) {
	podBuild, err := pl.PodBuild(b, buildv1.PodRoleManifestList, "")
	if err != nil {
		return nil, err
	}
	pod, err := pl.basePod(b, buildv1.ManifestListPodName(b.Name), buildv1.PodRoleManifestList, podBuild)
	if err != nil {
		return nil, err
	}
	sel := NodeSelector(b, pl.Config)
	delete(sel, corev1.LabelArchStable)
	if _, ok := sel[corev1.LabelOSStable]; !ok {
		sel[corev1.LabelOSStable] = "linux"
	}
	pod.Spec.NodeSelector = sel
	excludeUnfitNodes(pod, UnfitNodeRequirement(pl.Config))
	c := &pod.Spec.Containers[0]
	c.Name = ManifestListContainerName
	c.Image = pl.Config.BuilderImage
	c.Command = append([]string{"builder", "manifest-list"}, pl.insecureRegistryArgs()...)
	if d := cmp.Or(b.Spec.CompletionDeadlineSeconds, pl.Config.ActiveDeadlineSeconds); d != nil && *d > 0 {
		c.Command = append(c.Command, fmt.Sprintf("--wait-timeout=%ds", *d))
	}
	// The manifest-list pod only talks to the registry and the apiserver:
	// no capability at all, whatever build.podSecurity says.
	pod.Spec.HostUsers = ptr.To(false)
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	c.SecurityContext = &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	return pod, nil
}

// basePod is what every pod of a build shares: name, owner, labels,
// annotations, service account, tolerations, BUILD and the push secret.
func (pl PodPlan) basePod(b *buildv1.Build, name, role string, podBuild *buildv1.Build) (*corev1.Pod, error) {
	cfg := pl.Config
	raw, err := json.Marshal(podBuild)
	if err != nil {
		return nil, fmt.Errorf("encoding the Build for the pod: %w", err)
	}
	labels := map[string]string{}
	annotations := map[string]string{}
	maps.Copy(labels, cfg.BuildDefaults.Labels)
	maps.Copy(annotations, cfg.BuildDefaults.Annotations)
	if bc, ok := b.Labels[buildv1.BuildConfigLabel]; ok {
		labels[buildv1.BuildConfigLabel] = bc
	}
	maps.Copy(labels, cfg.BuildOverrides.Labels)
	maps.Copy(annotations, cfg.BuildOverrides.Annotations)
	labels[buildv1.BuildLabel] = buildv1.LabelValue(b.Name)
	labels[buildv1.PodRoleLabel] = role
	annotations[buildv1.BuildAnnotation] = b.Name
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   b.Namespace,
			Labels:      labels,
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         buildv1.GroupVersion.String(),
				Kind:               "Build",
				Name:               b.Name,
				UID:                b.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:      corev1.RestartPolicyNever,
			ServiceAccountName: podBuild.Spec.ServiceAccount,
			Tolerations:        Tolerations(cfg),
			Containers: []corev1.Container{{
				Env: []corev1.EnvVar{
					{Name: buildv1.BuildEnv, Value: string(raw)},
					{Name: PodNameEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: PodNamespaceEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
					{Name: PodUIDEnv, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
				},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
		},
	}
	if s := b.Spec.Output.PushSecret; s != nil && b.Spec.Output.To != nil {
		mountSecret(pod, "push-secret", s.Name, PushSecretMountPath)
		c := &pod.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: buildv1.PushDockerConfigPathEnv, Value: PushSecretMountPath})
	}
	pl.mountAccountSecrets(pod, b)
	pl.mountRegistryCAs(pod)
	return pod, nil
}

func mountSecret(pod *corev1.Pod, volume, secret, path string) {
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: secret}}})
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: path, ReadOnly: true})
}

// resources fills in the requests and limits the build does not set from
// the configured defaults, resource by resource.
func resources(own, defaults corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *own.DeepCopy()
	fill := func(dst *corev1.ResourceList, src corev1.ResourceList) {
		for name, q := range src {
			if _, ok := (*dst)[name]; ok {
				continue
			}
			if *dst == nil {
				*dst = corev1.ResourceList{}
			}
			(*dst)[name] = q.DeepCopy()
		}
	}
	fill(&out.Limits, defaults.Limits)
	fill(&out.Requests, defaults.Requests)
	// A default request above the build's own limit would make the pod
	// invalid: the limit wins.
	for name, req := range out.Requests {
		if limit, ok := out.Limits[name]; ok && req.Cmp(limit) > 0 {
			out.Requests[name] = limit.DeepCopy()
		}
	}
	return out
}
