package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// MaxPlatforms is the most target platforms a Build or BuildConfig may list
// in spec.platforms (and in spec.platformsAllowedToFail), and the most the
// controller resolves a Build to.
const MaxPlatforms = 16

// CommonSpec is what a Build and a BuildConfig have in common: where the
// source comes from, how it is built, where the image goes, and, as archway's
// extension, for which platforms.
//
// The rules on this type check platformsAllowedToFail against platforms. The
// CEL expressions compare platforms by their canonical form (the default
// variant of an architecture is left out, arm's is written out): this is the
// same equivalence as package platform's Normalize, which a unit test
// checks against the rules in the generated CRDs.
//
// +kubebuilder:validation:XValidation:rule=`!has(self.platforms) || self.platforms.size() == 0 || !has(self.platformsAllowedToFail) || self.platformsAllowedToFail.all(f, self.platforms.exists(p, (p.matches('^[^/]+/(arm64/v8([.]0)?|amd64/v1|ppc64(le)?/power8|riscv64/rva20u64)$') ? p.substring(0, p.lastIndexOf('/')) : p.matches('/arm64/v9[.]0$') ? p.substring(0, p.size() - 2) : p.matches('^[^/]+/arm$') ? p + '/v7' : p) == (f.matches('^[^/]+/(arm64/v8([.]0)?|amd64/v1|ppc64(le)?/power8|riscv64/rva20u64)$') ? f.substring(0, f.lastIndexOf('/')) : f.matches('/arm64/v9[.]0$') ? f.substring(0, f.size() - 2) : f.matches('^[^/]+/arm$') ? f + '/v7' : f)))`,messageExpression=`'"' + self.platformsAllowedToFail.filter(f, !self.platforms.exists(p, (p.matches('^[^/]+/(arm64/v8([.]0)?|amd64/v1|ppc64(le)?/power8|riscv64/rva20u64)$') ? p.substring(0, p.lastIndexOf('/')) : p.matches('/arm64/v9[.]0$') ? p.substring(0, p.size() - 2) : p.matches('^[^/]+/arm$') ? p + '/v7' : p) == (f.matches('^[^/]+/(arm64/v8([.]0)?|amd64/v1|ppc64(le)?/power8|riscv64/rva20u64)$') ? f.substring(0, f.lastIndexOf('/')) : f.matches('/arm64/v9[.]0$') ? f.substring(0, f.size() - 2) : f.matches('^[^/]+/arm$') ? f + '/v7' : f)))[0] + '" is not in platforms; platformsAllowedToFail must be a subset of platforms'`,fieldPath=`.platformsAllowedToFail`
// +kubebuilder:validation:XValidation:rule=`self.strategy.type != 'Source' || !has(self.source) || !has(self.source.secrets) || self.source.secrets.all(x, !has(x.destinationDir) || (x.destinationDir.matches('^[A-Za-z0-9._/@+-]*$') && !x.destinationDir.matches('(^|/)[.][.](/|$)')))`,message="with strategy Source, source.secrets[].destinationDir may hold only letters, digits and . _ - + @ /, and no .. (assemble finds the keys there, mounted for its step alone)",fieldPath=`.source.secrets`
type CommonSpec struct {
	// serviceAccount is the name of the ServiceAccount the build pods run
	// as. Default: the controller's configured builder service account
	// ("builder" in OpenShift).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServiceAccount string `json:"serviceAccount,omitempty"`

	// source describes the input of the build: a Git repository, an inline
	// Dockerfile, a binary stream, or none. Default: no source.
	// +optional
	Source BuildSource `json:"source,omitempty"`

	// revision is the source revision the build is for, when known. On a
	// Build of a Git source without one, the first build pod to fetch the
	// source records the commit it resolved source.git.ref to (hash,
	// author, committer, message), once, as OpenShift's builder does;
	// every other platform's pod then builds exactly that commit. Set when
	// the Build is created (a webhook's commit), every pod builds it. It
	// cannot change once set.
	// +optional
	Revision *SourceRevision `json:"revision,omitempty"`

	// strategy says how the image is built. Required.
	Strategy BuildStrategy `json:"strategy"`

	// output says where the built image is pushed. Default: nowhere; a
	// build without output.to builds and discards the image (for a
	// multi-platform build, each platform's image; no manifest list is
	// assembled), and says so with the NoOutput condition.
	// +optional
	Output BuildOutput `json:"output,omitempty"`

	// resources are the compute resources of each build pod. Default: none.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// postCommit is a command run in the built image before it is pushed;
	// a failure fails the build. Default: none.
	// +optional
	PostCommit BuildPostCommitSpec `json:"postCommit,omitempty"`

	// completionDeadlineSeconds is how long a build may run, counted from
	// the moment its pods are scheduled, before the controller stops it.
	// Default: no deadline. Must be at least 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	CompletionDeadlineSeconds *int64 `json:"completionDeadlineSeconds,omitempty"`

	// nodeSelector is added to every build pod's node selector. As in
	// OpenShift, null (the default) lets the cluster's default build node
	// selector apply, while an empty map means "no selector" and keeps the
	// default from applying. For a multi-platform build the controller adds
	// kubernetes.io/os and kubernetes.io/arch per platform; a nodeSelector
	// naming another architecture fails the build with the reason
	// NodeSelectorPlatformConflict.
	// +optional
	// +nullable
	NodeSelector OptionalNodeSelector `json:"nodeSelector"`

	// mountTrustedCA gives the build's RUN steps the cluster's trusted
	// certificate authorities: the bundle the build controller's
	// configuration names (build.trustedCA, a ConfigMap in the Build's
	// namespace) is mounted read-only at the system trust paths
	// (/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem and
	// /etc/ssl/certs/ca-certificates.crt) for each step, and never
	// written into the image. A Build that sets it while the bundle is
	// not there fails with the reason MissingTrustedCABundle. Default:
	// false.
	// +optional
	MountTrustedCA *bool `json:"mountTrustedCA,omitempty"`

	// The duplicate rule normalizes each entry once and compares the count of
	// distinct forms. Its message lists the normalized forms (n), keeps the
	// entries whose form is not unique (d), and says which two entries clash
	// or that several do; a one-element list and map bind n and d, since CEL
	// has no variables.

	// platforms are the target platforms of the build, each "os/arch" or
	// "os/arch/variant" in lowercase (linux/amd64, linux/arm64,
	// linux/arm/v7). The controller builds each in its own pod on a node of
	// that os and architecture and, when output.to is set, pushes a manifest
	// list naming every platform's image. Default: unset, meaning the
	// controller's configured platforms, or else every platform of the
	// cluster's nodes; the platforms a Build was resolved to are the keys of
	// its status.platforms. At most 16 entries, each at most 63 characters;
	// no two entries may be the same platform once normalized (linux/arm64
	// and linux/arm64/v8 are the same).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule=`self.matches('^[a-z0-9]([a-z0-9._-]*[a-z0-9])?/[a-z0-9]([a-z0-9._-]*[a-z0-9])?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)?$')`,messageExpression=`self.contains(' ') && self.replace(' ', "") != "" ? '"' + self + '": remove the spaces ("' + self.replace(' ', "") + '")' : self.lowerAscii() != self ? '"' + self + '": use lowercase ("' + self.lowerAscii() + '")' : '"' + self + '" is not os/arch or os/arch/variant (e.g. linux/arm64)'`
	// +kubebuilder:validation:XValidation:rule=`self.map(p, p.matches('^[^/]+/(arm64/v8([.]0)?|amd64/v1|ppc64(le)?/power8|riscv64/rva20u64)$') ? p.substring(0, p.lastIndexOf('/')) : p.matches('/arm64/v9[.]0$') ? p.substring(0, p.size() - 2) : p.matches('^[^/]+/arm$') ? p + '/v7' : p).distinct().size() == self.size()`,messageExpression=`[[self.map(p, p.matches('^[^/]+/(arm64/v8([.]0)?|amd64/v1|ppc64(le)?/power8|riscv64/rva20u64)$') ? p.substring(0, p.lastIndexOf('/')) : p.matches('/arm64/v9[.]0$') ? p.substring(0, p.size() - 2) : p.matches('^[^/]+/arm$') ? p + '/v7' : p)].map(n, self.transformList(i, p, !n.exists_one(w, w == n[i]), p))[0]].map(d, d.size() == 2 ? (d[0] == d[1] ? '"' + d[0] + '" is listed twice' : '"' + d[1] + '" is the same platform as "' + d[0] + '"') + '; remove one of them' : '"' + d[0] + '" and other platforms are listed more than once (compared normalized, linux/arm64 = linux/arm64/v8); list each platform once')[0]`
	Platforms []string `json:"platforms,omitempty"`

	// platformsAllowedToFail are platforms whose failure does not fail the
	// build: the build completes when every other platform succeeds, and the
	// manifest list leaves the failed ones out. Same format as platforms;
	// when platforms is set, every entry must be one of them (compared
	// normalized). Default: none. At most 16 entries.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:XValidation:rule=`self.matches('^[a-z0-9]([a-z0-9._-]*[a-z0-9])?/[a-z0-9]([a-z0-9._-]*[a-z0-9])?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)?$')`,messageExpression=`self.contains(' ') && self.replace(' ', "") != "" ? '"' + self + '": remove the spaces ("' + self.replace(' ', "") + '")' : self.lowerAscii() != self ? '"' + self + '": use lowercase ("' + self.lowerAscii() + '")' : '"' + self + '" is not os/arch or os/arch/variant (e.g. linux/arm64)'`
	PlatformsAllowedToFail []string `json:"platformsAllowedToFail,omitempty"`
}

// OptionalNodeSelector is a node selector that tells null (let the cluster's
// default apply) from empty (no selector at all).
type OptionalNodeSelector map[string]string

// BuildSourceType names the kind of input a build reads.
type BuildSourceType string

// The source types archway builds from. OpenShift's Image source type is not
// supported.
const (
	// BuildSourceGit builds from a Git repository (source.git).
	BuildSourceGit BuildSourceType = "Git"
	// BuildSourceDockerfile builds from an inline Dockerfile
	// (source.dockerfile).
	BuildSourceDockerfile BuildSourceType = "Dockerfile"
	// BuildSourceBinary builds from an archive or file streamed to the build
	// (source.binary).
	BuildSourceBinary BuildSourceType = "Binary"
	// BuildSourceNone builds with no source.
	BuildSourceNone BuildSourceType = "None"
)

// BuildSource is the input of a build.
//
// +kubebuilder:validation:XValidation:rule=`!has(self.type) || self.type != 'Git' || has(self.git)`,message="type Git needs git (the repository to clone)"
// +kubebuilder:validation:XValidation:rule=`!has(self.type) || self.type != 'Dockerfile' || has(self.dockerfile)`,message="type Dockerfile needs dockerfile (the Dockerfile's text)"
// +kubebuilder:validation:XValidation:rule=`!has(self.git) || !has(self.binary)`,message="git and binary cannot both be set: a build reads one or the other"
// +kubebuilder:validation:XValidation:rule=`!has(self.type) || self.type != 'Dockerfile' || (!has(self.git) && !has(self.binary))`,message="type Dockerfile builds the inline Dockerfile alone: remove git and binary, or set type Git to build the repository with this Dockerfile"
// +kubebuilder:validation:XValidation:rule=`!has(self.type) || self.type != 'None' || (!has(self.git) && !has(self.binary) && !has(self.dockerfile))`,message="type None builds without a source: remove git, binary and dockerfile, or set the type they need"
// +kubebuilder:validation:XValidation:rule=`!has(self.images)`,message="images (content copied from other images into the build context, OpenShift's image source) is not supported by archway: copy the files in the Dockerfile instead (COPY --from=<image>)",fieldPath=`.images`
type BuildSource struct {
	// type is the kind of source: Git, Dockerfile, Binary or None. Default:
	// unset, in which case the fields that are set say it.
	// +optional
	// +kubebuilder:validation:Enum=Git;Dockerfile;Binary;None
	Type BuildSourceType `json:"type,omitempty"`

	// binary says the source is streamed to the build (oc start-build
	// --from-dir and the like). Default: unset.
	// +optional
	Binary *BinaryBuildSource `json:"binary,omitempty"`

	// dockerfile is the text of a Dockerfile to build. With git it replaces
	// the repository's Dockerfile. Default: unset. At most 60000 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=60000
	Dockerfile *string `json:"dockerfile,omitempty"`

	// git is the Git repository to clone. Default: unset.
	// +optional
	Git *GitBuildSource `json:"git,omitempty"`

	// contextDir is the directory inside the source the build runs in.
	// Default: the source's root.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ContextDir string `json:"contextDir,omitempty"`

	// sourceSecret names a Secret with the credentials to fetch the source
	// (basic auth, SSH key, .gitconfig or CA certificate). Default: none.
	// +optional
	SourceSecret *corev1.LocalObjectReference `json:"sourceSecret,omitempty"`

	// secrets are Secrets given to the build: copied into the build context
	// (Docker), or mounted for the assemble step and left out of the image
	// (Source). Default: none.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Secrets []SecretBuildSource `json:"secrets,omitempty"`

	// configMaps are ConfigMaps copied into the build context (Docker), or
	// into the builder image's working directory before assemble (Source),
	// for the build to use. Default: none.
	// +optional
	// +listType=atomic
	ConfigMaps []ConfigMapBuildSource `json:"configMaps,omitempty"`

	// images is OpenShift's image source (files copied from other images
	// into the build context), which archway does not implement: a Build
	// or BuildConfig that sets it is refused, never built without it. The
	// field exists so that the refusal names it. Default: unset.
	// +optional
	// +listType=atomic
	Images []runtime.RawExtension `json:"images,omitempty"`
}

// SecretBuildSource gives a Secret's keys to the build: with strategy
// Docker they are copied into the build context; with strategy Source they
// are mounted for the assemble step alone and left out of the image.
type SecretBuildSource struct {
	// secret names the Secret. Required.
	Secret corev1.LocalObjectReference `json:"secret"`

	// destinationDir is the directory the Secret's keys go into, one file
	// each. Docker: relative to the build context, into which they are
	// copied. Source: relative to the builder image's working directory,
	// or absolute; assemble finds the keys there, and they are in no layer
	// of the image. Default: the build context's root (Docker), the
	// working directory (Source).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	DestinationDir string `json:"destinationDir,omitempty"`
}

// ConfigMapBuildSource copies a ConfigMap's keys into the build context
// (Docker) or the image (Source).
type ConfigMapBuildSource struct {
	// configMap names the ConfigMap. Required.
	ConfigMap corev1.LocalObjectReference `json:"configMap"`

	// destinationDir is the directory the ConfigMap's keys are copied into,
	// one file each: relative to the build context (Docker), or relative to
	// the builder image's working directory, or absolute (Source). Default:
	// the build context's root (Docker), the working directory (Source).
	// +optional
	DestinationDir string `json:"destinationDir,omitempty"`
}

// BinaryBuildSource says the source is streamed to the build.
type BinaryBuildSource struct {
	// asFile, when set, stores the stream as a single file of this name in
	// the build context instead of extracting it as an archive. Default:
	// unset (extract).
	// +optional
	AsFile string `json:"asFile,omitempty"`

	// artifact is archway's addition: the OCI artifact holding the binary
	// input, as an image reference by digest
	// (registry/repository@sha256:<64 hex>). The binary-build endpoint of
	// build-controller (kubectl archway start-build --from-dir) stores the
	// uploaded archive once in the output repository and sets it, so that
	// every platform's build pod reads the same bytes; each pulls it with
	// the push secret and checks its digest before extracting it. It must
	// name the repository of output.to. Default: unset (the input is read
	// from the build's standard input, as OpenShift streams it).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[^@ ]+@sha256:[a-f0-9]{64}$')`,message="artifact must be an image reference by digest: registry/repository@sha256:<64 hex digits>"
	Artifact string `json:"artifact,omitempty"`
}

// SourceRevision is the revision of the source a build is for.
type SourceRevision struct {
	// type is the kind of source the revision belongs to. Required.
	// +kubebuilder:validation:Enum=Git;Dockerfile;Binary;None
	Type BuildSourceType `json:"type"`

	// git is the Git commit. Default: unset.
	// +optional
	Git *GitSourceRevision `json:"git,omitempty"`
}

// GitSourceRevision is a Git commit.
type GitSourceRevision struct {
	// commit is the commit hash. Default: empty. Must not start with "-"
	// (git would read it as an option).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule=`!self.startsWith('-')`,message="commit must not start with \"-\" (git would read it as an option): give a commit hash"
	Commit string `json:"commit,omitempty"`

	// author is the commit's author. Default: empty.
	// +optional
	Author SourceControlUser `json:"author,omitempty"`

	// committer is the commit's committer. Default: empty.
	// +optional
	Committer SourceControlUser `json:"committer,omitempty"`

	// message is the commit message. Default: empty.
	// +optional
	Message string `json:"message,omitempty"`
}

// SourceControlUser is a person in a commit.
type SourceControlUser struct {
	// name is the person's name. Default: empty.
	// +optional
	Name string `json:"name,omitempty"`

	// email is the person's e-mail address. Default: empty.
	// +optional
	Email string `json:"email,omitempty"`
}

// GitBuildSource is a Git repository to build from.
type GitBuildSource struct {
	// uri is the repository's URL, as git clone takes it: http(s), ssh
	// (also [user@]host:path) or git; local repositories (file:// or a
	// path) only where build-controller's allowFileGitURIs is on. Required;
	// must not start with "-" (git would read it as an option) nor name a
	// remote helper (<transport>::<address>, e.g. ext::). Credentials in it
	// (https://user:token@host/...) are redacted from logs, status and
	// image labels; a sourceSecret is the better place for them.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:XValidation:rule=`!self.startsWith('-')`,message="uri must not start with \"-\" (git would read it as an option): use a URL such as https://git.example.com/team/app.git"
	// +kubebuilder:validation:XValidation:rule=`!self.matches('^[A-Za-z][A-Za-z0-9+.-]*::')`,message="uri must not name a git remote helper (<transport>::<address>, such as ext::), which runs commands: use an http(s), ssh or git URL"
	URI string `json:"uri"`

	// ref is the branch, tag or commit to build. Default: the repository's
	// default branch. Must not start with "-" (git would read it as an
	// option).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule=`!self.startsWith('-')`,message="ref must not start with \"-\" (git would read it as an option): name a branch, tag or commit"
	Ref string `json:"ref,omitempty"`

	// ProxyConfig holds the proxies used to clone.
	ProxyConfig `json:",inline"`
}

// ProxyConfig holds the proxies used to fetch the source.
type ProxyConfig struct {
	// httpProxy is the proxy for http:// URLs. Default: the cluster's.
	// +optional
	HTTPProxy *string `json:"httpProxy,omitempty"`

	// httpsProxy is the proxy for https:// URLs. Default: the cluster's.
	// +optional
	HTTPSProxy *string `json:"httpsProxy,omitempty"`

	// noProxy lists the hosts reached without a proxy, comma-separated.
	// Default: the cluster's.
	// +optional
	NoProxy *string `json:"noProxy,omitempty"`
}

// BuildStrategyType names how an image is built.
type BuildStrategyType string

// The strategies. OpenShift's Custom and JenkinsPipeline strategies are not
// supported.
const (
	// DockerBuildStrategyType builds a Dockerfile (Containerfile).
	DockerBuildStrategyType BuildStrategyType = "Docker"
	// SourceBuildStrategyType is OpenShift's source-to-image build: the
	// builder image's assemble script builds the source, per platform,
	// with the builder image of that platform.
	SourceBuildStrategyType BuildStrategyType = "Source"
)

// BuildStrategy says how the image is built.
//
// +kubebuilder:validation:XValidation:rule=`self.type == 'Docker' ? !has(self.sourceStrategy) : has(self.sourceStrategy) && !has(self.dockerStrategy)`,messageExpression=`self.type == 'Docker' ? 'type Docker takes dockerStrategy, not sourceStrategy' : 'type Source needs sourceStrategy, and no dockerStrategy'`
// +kubebuilder:validation:XValidation:rule=`!has(self.customStrategy)`,message="customStrategy (OpenShift's Custom strategy) is not supported by archway: use type Docker",fieldPath=`.customStrategy`
// +kubebuilder:validation:XValidation:rule=`!has(self.jenkinsPipelineStrategy)`,message="jenkinsPipelineStrategy (OpenShift's deprecated JenkinsPipeline strategy) is not supported by archway: run the pipeline in Jenkins or Tekton, with type Docker builds",fieldPath=`.jenkinsPipelineStrategy`
type BuildStrategy struct {
	// type is the strategy: Docker or Source. Required.
	// +kubebuilder:validation:Enum=Docker;Source
	Type BuildStrategyType `json:"type"`

	// dockerStrategy holds the options of a Docker build. Default: unset
	// (all defaults) for type Docker; must be unset for type Source.
	// +optional
	DockerStrategy *DockerBuildStrategy `json:"dockerStrategy,omitempty"`

	// sourceStrategy holds the options of a Source build. Required for type
	// Source; must be unset for type Docker.
	// +optional
	SourceStrategy *SourceBuildStrategy `json:"sourceStrategy,omitempty"`

	// customStrategy is OpenShift's Custom strategy, which archway does not
	// implement: a Build or BuildConfig that sets it is refused. The field
	// exists so that the refusal names it. Default: unset.
	// +optional
	CustomStrategy *runtime.RawExtension `json:"customStrategy,omitempty"`

	// jenkinsPipelineStrategy is OpenShift's deprecated JenkinsPipeline
	// strategy, which archway does not implement: a Build or BuildConfig
	// that sets it is refused. The field exists so that the refusal names
	// it. Default: unset.
	// +optional
	JenkinsPipelineStrategy *runtime.RawExtension `json:"jenkinsPipelineStrategy,omitempty"`
}

// ImageOptimizationPolicy says how image layers are committed.
type ImageOptimizationPolicy string

// The image optimization policies.
const (
	// ImageOptimizationNone commits a layer per Dockerfile instruction
	// that changes the filesystem.
	ImageOptimizationNone ImageOptimizationPolicy = "None"
	// ImageOptimizationSkipLayers squashes the new layers into one.
	ImageOptimizationSkipLayers ImageOptimizationPolicy = "SkipLayers"
	// ImageOptimizationSkipLayersAndWarn is SkipLayers, and the build log
	// warns that the layers are squashed.
	ImageOptimizationSkipLayersAndWarn ImageOptimizationPolicy = "SkipLayersAndWarn"
)

// SkipsLayers reports whether p squashes the layers a build adds
// (SkipLayers or SkipLayersAndWarn); nil is None.
func (p *ImageOptimizationPolicy) SkipsLayers() bool {
	return p != nil && (*p == ImageOptimizationSkipLayers || *p == ImageOptimizationSkipLayersAndWarn)
}

// DockerBuildStrategy holds the options of a Docker build.
// +kubebuilder:validation:XValidation:rule=`!has(self.imageOptimizationPolicy) || self.imageOptimizationPolicy == 'None' || !has(self.layerCache) || !has(self.layerCache.mode) || self.layerCache.mode != 'Registry'`,messageExpression=`'imageOptimizationPolicy ' + self.imageOptimizationPolicy + ' squashes the layers the build adds into one, and layerCache mode Registry keeps a layer per step: remove layerCache or set imageOptimizationPolicy None'`
type DockerBuildStrategy struct {
	// from replaces the image of the Dockerfile's last FROM. Default: the
	// Dockerfile's. kind is DockerImage, or, where the cluster serves
	// OpenShift image streams (image.openshift.io/v1), ImageStreamTag or
	// ImageStreamImage (refused at admission elsewhere).
	// For a multi-platform build the image must be a manifest list with an
	// entry for every target platform.
	// +optional
	// +kubebuilder:validation:XValidation:rule=`has(self.kind) && self.kind in ['DockerImage', 'ImageStreamTag', 'ImageStreamImage']`,messageExpression=`(has(self.kind) ? 'kind ' + self.kind + ' is not supported' : 'kind is required') + ': use kind DockerImage with an image reference, or, where the cluster serves OpenShift image streams, ImageStreamTag (<stream>:<tag>) or ImageStreamImage (<stream>@<digest>)'`
	// +kubebuilder:validation:XValidation:rule=`has(self.name) && self.name != ""`,message="name must be an image reference, e.g. registry.example.com/team/base:1.0",fieldPath=`.name`,reason=FieldValueRequired
	From *corev1.ObjectReference `json:"from,omitempty"`

	// pullSecret names a Secret with credentials to pull the base images.
	// Default: the service account's image pull secrets.
	// +optional
	PullSecret *corev1.LocalObjectReference `json:"pullSecret,omitempty"`

	// noCache runs every step, reusing no cached layer; a layerCache is
	// still written, so it is refreshed. Default: false.
	// +optional
	NoCache bool `json:"noCache,omitempty"`

	// env are environment variables set in the build. Default: none.
	// +optional
	// +listType=atomic
	Env []corev1.EnvVar `json:"env,omitempty"`

	// forcePull pulls base images even when present. Default: false.
	// +optional
	ForcePull bool `json:"forcePull,omitempty"`

	// dockerfilePath is the Dockerfile's path relative to contextDir.
	// Default: Dockerfile.
	// +optional
	DockerfilePath string `json:"dockerfilePath,omitempty"`

	// buildArgs are the Dockerfile's ARG values. Default: none.
	// +optional
	// +listType=atomic
	BuildArgs []corev1.EnvVar `json:"buildArgs,omitempty"`

	// imageOptimizationPolicy is None (a layer per instruction that changes
	// the filesystem, as docker build commits them), SkipLayers (the
	// layers the build adds are squashed into one, on top of the base
	// image's layers) or SkipLayersAndWarn (SkipLayers, and the build log
	// warns that it is used). buildah squashes any Dockerfile, so
	// SkipLayers never fails for want of compatibility. A squashed build
	// uses no layer cache: layerCache mode Registry is refused with it,
	// and the build controller's default cache is not applied. Default:
	// None.
	// +optional
	// +kubebuilder:validation:Enum=None;SkipLayers;SkipLayersAndWarn
	ImageOptimizationPolicy *ImageOptimizationPolicy `json:"imageOptimizationPolicy,omitempty"`

	// volumes are mounted into the build's RUN steps. Default: none.
	// +optional
	// +listType=map
	// +listMapKey=name
	Volumes []BuildVolume `json:"volumes,omitempty"`

	// layerCache keeps the steps the build runs in a registry, so that
	// later builds, each in a fresh build pod, reuse the steps whose inputs
	// did not change (an archway extension). noCache still runs every step
	// (and refreshes the cache). Default: the build controller's
	// build.layerCache.
	// +optional
	LayerCache *LayerCache `json:"layerCache,omitempty"`
}

// LayerCacheMode says whether a Docker build uses a layer cache.
type LayerCacheMode string

// The layer cache modes.
const (
	// LayerCacheRegistry looks each step up in a registry repository of
	// the build's platform before running it, and pushes the steps it runs
	// there.
	LayerCacheRegistry LayerCacheMode = "Registry"
	// LayerCacheDisabled runs every step and keeps none.
	LayerCacheDisabled LayerCacheMode = "Disabled"
)

// LayerCache is where a Docker build keeps its steps for later builds.
type LayerCache struct {
	// mode is Registry or Disabled. Default: the build controller's
	// build.layerCache.mode, else Disabled.
	// +optional
	// +kubebuilder:validation:Enum=Registry;Disabled
	Mode LayerCacheMode `json:"mode,omitempty"`

	// repository names the cache repositories, one per platform:
	// <repository>-<os>-<arch>[-<variant>] (e.g.
	// registry.example.com/team/app-cache-linux-arm64), so that platforms
	// never share a cache. The build pod pulls from and pushes to them with
	// the push secret. A repository name without tag or digest, at most 200
	// characters. Default: the output's repository followed by "-cache".
	// +optional
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:XValidation:rule=`self.matches('^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?(:[0-9]+)?(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*$')`,messageExpression=`self.contains('@') || self.substring(self.lastIndexOf('/') + 1).contains(':') ? '"' + self + '" names a tag or digest: name the repository only, e.g. registry.example.com/team/app-cache' : '"' + self + '" is not a repository name, e.g. registry.example.com/team/app-cache (lowercase path components)'`
	Repository string `json:"repository,omitempty"`
}

// SourceBuildStrategy holds the options of a Source (source-to-image) build.
type SourceBuildStrategy struct {
	// from is the builder image. Required. kind is DockerImage, or, where
	// the cluster serves OpenShift image streams (image.openshift.io/v1),
	// ImageStreamTag or ImageStreamImage (refused at admission elsewhere).
	// +kubebuilder:validation:XValidation:rule=`has(self.kind) && self.kind in ['DockerImage', 'ImageStreamTag', 'ImageStreamImage']`,messageExpression=`(has(self.kind) ? 'kind ' + self.kind + ' is not supported' : 'kind is required') + ': use kind DockerImage with an image reference, or, where the cluster serves OpenShift image streams, ImageStreamTag (<stream>:<tag>) or ImageStreamImage (<stream>@<digest>)'`
	// +kubebuilder:validation:XValidation:rule=`has(self.name) && self.name != ""`,message="name must be an image reference, e.g. registry.example.com/team/builder:1.0",fieldPath=`.name`,reason=FieldValueRequired
	From corev1.ObjectReference `json:"from"`

	// pullSecret names a Secret with credentials to pull the builder image.
	// Default: the service account's image pull secrets.
	// +optional
	PullSecret *corev1.LocalObjectReference `json:"pullSecret,omitempty"`

	// env are environment variables set in the build. Default: none.
	// +optional
	// +listType=atomic
	Env []corev1.EnvVar `json:"env,omitempty"`

	// scripts is the URL of the directory holding the assemble, run and
	// save-artifacts scripts: image:///path (a directory of the builder
	// image) or an http(s) URL. The source's .s2i/bin overrides it.
	// Default: the builder image's io.openshift.s2i.scripts-url label.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule=`self == '' || self.startsWith('image:///') || self.startsWith('http://') || self.startsWith('https://')`,message="scripts must be image:///directory/in/the/builder/image or an http(s) URL"
	Scripts string `json:"scripts,omitempty"`

	// incremental gives assemble the artifacts of the previous image of
	// the same platform: each platform's pod reads the output's image for
	// its platform (the index's child), with the pull credentials, runs
	// its save-artifacts script and restores what it wrote before
	// assemble (in the destination's artifacts directory). Without a
	// previous image for the platform, the platform builds in full.
	// Default: false.
	// +optional
	Incremental *bool `json:"incremental,omitempty"`

	// forcePull pulls the builder image even when present. Default: false.
	// +optional
	ForcePull bool `json:"forcePull,omitempty"`

	// volumes are mounted, read-only, into the build's steps (assemble
	// among them) and left out of the image. Default: none.
	// +optional
	// +listType=map
	// +listMapKey=name
	Volumes []BuildVolume `json:"volumes,omitempty"`

	// layerCache keeps the steps of the Dockerfile the build writes from
	// the builder image (assemble's among them) in a registry, as a
	// Docker strategy's layerCache does (an archway extension): a build
	// whose source, builder image, scripts and environment did not change
	// reuses them. Default: the build controller's build.layerCache.
	// +optional
	LayerCache *LayerCache `json:"layerCache,omitempty"`
}

// BuildVolumeSourceType names where a build volume's content comes from.
type BuildVolumeSourceType string

// The build volume source types.
const (
	// BuildVolumeSourceTypeSecret mounts a Secret.
	BuildVolumeSourceTypeSecret BuildVolumeSourceType = "Secret"
	// BuildVolumeSourceTypeConfigMap mounts a ConfigMap.
	BuildVolumeSourceTypeConfigMap BuildVolumeSourceType = "ConfigMap"
	// BuildVolumeSourceTypeCSI mounts an inline CSI volume.
	BuildVolumeSourceTypeCSI BuildVolumeSourceType = "CSI"
)

// BuildVolume is a volume mounted into a build.
type BuildVolume struct {
	// name identifies the volume among the strategy's volumes. Required.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// source is where the volume's content comes from. Required.
	Source BuildVolumeSource `json:"source"`

	// mounts are where the volume is mounted in the build. Required.
	// +listType=map
	// +listMapKey=destinationPath
	Mounts []BuildVolumeMount `json:"mounts"`
}

// BuildVolumeSource is where a build volume's content comes from.
//
// +kubebuilder:validation:XValidation:rule=`(self.type == 'Secret') == has(self.secret) && (self.type == 'ConfigMap') == has(self.configMap) && (self.type == 'CSI') == has(self.csi)`,messageExpression=`'type ' + self.type + ' takes ' + {'Secret': 'secret', 'ConfigMap': 'configMap', 'CSI': 'csi'}[self.type] + ' alone: set it, and remove the others'`
type BuildVolumeSource struct {
	// type is Secret, ConfigMap or CSI. Required.
	// +kubebuilder:validation:Enum=Secret;ConfigMap;CSI
	Type BuildVolumeSourceType `json:"type"`

	// secret is the Secret for type Secret. Default: unset.
	// +optional
	Secret *corev1.SecretVolumeSource `json:"secret,omitempty"`

	// configMap is the ConfigMap for type ConfigMap. Default: unset.
	// +optional
	ConfigMap *corev1.ConfigMapVolumeSource `json:"configMap,omitempty"`

	// csi is the CSI volume for type CSI. Default: unset.
	// +optional
	CSI *corev1.CSIVolumeSource `json:"csi,omitempty"`
}

// BuildVolumeMount is where a build volume is mounted.
type BuildVolumeMount struct {
	// destinationPath is the absolute path the volume is mounted at in the
	// build. Required.
	// +kubebuilder:validation:MinLength=1
	DestinationPath string `json:"destinationPath"`
}

// BuildPostCommitSpec is a command run in the built image before it is
// pushed (each platform's image, foreign ones under emulation); a failure
// fails the platform with the reason PostCommitHookFailed, and nothing of
// it is pushed.
//
// +kubebuilder:validation:XValidation:rule=`!has(self.script) || self.script == "" || !has(self.command) || self.command.size() == 0`,message="set command or script, not both"
type BuildPostCommitSpec struct {
	// command is the command to run, replacing the image's entrypoint.
	// Default: none.
	// +optional
	// +listType=atomic
	Command []string `json:"command,omitempty"`

	// args are the arguments of command, or of the image's entrypoint.
	// Default: none.
	// +optional
	// +listType=atomic
	Args []string `json:"args,omitempty"`

	// script is a shell script run with /bin/sh -ic. Default: none.
	// +optional
	Script string `json:"script,omitempty"`
}

// BuildOutput says where the built image is pushed.
type BuildOutput struct {
	// to is the image reference to push to: kind DockerImage and name a
	// pull spec (registry/repository:tag). For a multi-platform build the
	// manifest list is pushed here and each platform's image to the same
	// repository. Default: unset, meaning the image is not pushed. kind is
	// DockerImage, or, where the cluster serves OpenShift image streams
	// (image.openshift.io/v1), ImageStreamTag (refused at admission
	// elsewhere).
	// +optional
	// +kubebuilder:validation:XValidation:rule=`has(self.kind) && self.kind in ['DockerImage', 'ImageStreamTag']`,messageExpression=`(has(self.kind) ? 'kind ' + self.kind + ' is not supported' : 'kind is required') + ': use kind DockerImage with an image reference, or, where the cluster serves OpenShift image streams, ImageStreamTag (<stream>:<tag>)'`
	// +kubebuilder:validation:XValidation:rule=`has(self.name) && self.name != ""`,message="name must be an image reference, e.g. registry.example.com/team/app:latest",fieldPath=`.name`,reason=FieldValueRequired
	To *corev1.ObjectReference `json:"to,omitempty"`

	// pushSecret names a Secret with credentials to push to. Default: the
	// service account's. It may change after a Build is created, as in
	// OpenShift.
	// +optional
	PushSecret *corev1.LocalObjectReference `json:"pushSecret,omitempty"`

	// imageLabels are labels added to the image's config. Default: none.
	// Names must be unique.
	// +optional
	// +listType=map
	// +listMapKey=name
	ImageLabels []ImageLabel `json:"imageLabels,omitempty"`
}

// ImageLabel is a label set on the built image.
type ImageLabel struct {
	// name is the label's name. Required.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`

	// value is the label's value. Default: empty.
	// +optional
	Value string `json:"value,omitempty"`
}
