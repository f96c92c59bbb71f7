package v1

// This file lists every name archway's builds share with users and other
// programs: labels, annotations, phases, reasons, condition types, event
// reasons and well-known keys. OpenShift's names are kept where they exist;
// archway's additions live under build.openshift.io/.

// Labels and annotations OpenShift defines, with the meaning OpenShift gives
// them.
const (
	// BuildLabel is set on every pod of a build (each platform's pod and the
	// manifest-list pod) and on nothing else, with the Build's name as its
	// value (shortened to a valid label value when the name is longer than
	// 63 characters). It selects all the pods of a build:
	// kubectl get pods -l openshift.io/build.name=<build>.
	BuildLabel = "openshift.io/build.name"

	// BuildAnnotation is set on a build's pods, naming the Build in full.
	BuildAnnotation = "openshift.io/build.name"

	// BuildPodNameAnnotation is set on a Build, naming its pod. For a
	// multi-platform build it names the last pod to finish: the
	// manifest-list pod when the build has an output, else the first
	// platform's pod. Find all pods with PodSelectorAnnotation.
	BuildPodNameAnnotation = "openshift.io/build.pod-name"

	// BuildConfigLabel is set on Builds started from a BuildConfig and on
	// their pods, with the BuildConfig's name as its value.
	BuildConfigLabel = "openshift.io/build-config.name"

	// BuildConfigAnnotation is set on Builds started from a BuildConfig,
	// naming the BuildConfig in full.
	BuildConfigAnnotation = "openshift.io/build-config.name"

	// BuildNumberAnnotation is set on Builds started from a BuildConfig,
	// holding the build's number (the BuildConfig's lastVersion when it
	// started).
	BuildNumberAnnotation = "openshift.io/build.number"

	// BuildRunPolicyLabel is set on Builds started from a BuildConfig,
	// holding the BuildConfig's runPolicy when the build was created.
	BuildRunPolicyLabel = "openshift.io/build.start-policy"

	// BuildConfigPausedAnnotation on a BuildConfig, set to "true", stops its
	// triggers from starting builds.
	BuildConfigPausedAnnotation = "openshift.io/build-config.paused"
)

// Labels and annotations archway adds for multi-platform builds.
const (
	// PodSelectorAnnotation is set on every Build by the controller when it
	// creates the build's pods (for a classic build, just before its pod).
	// Its value is a label selector that
	// selects all of the build's pods, one per platform plus the
	// manifest-list pod, e.g. "openshift.io/build.name=app-7":
	// kubectl get pods -l "$(kubectl get build app-7 -o
	// jsonpath='{.metadata.annotations.build\.openshift\.io/pod-selector}')".
	// It supplements BuildPodNameAnnotation, which can name only one pod.
	PodSelectorAnnotation = "build.openshift.io/pod-selector"

	// PlatformLabel is set on each platform's build pod. A label value
	// cannot hold "/", so its value is the canonical form of the platform
	// with every character a label cannot hold replaced by "-" (package
	// platform's NameSuffix): linux-amd64, linux-arm64, linux-arm-v7. It
	// selects one platform's pod, e.g. for its logs:
	// kubectl logs -l openshift.io/build.name=app-7,build.openshift.io/platform=linux-arm64.
	// The manifest-list pod does not carry it.
	PlatformLabel = "build.openshift.io/platform"

	// PlatformAnnotation is set on each platform's build pod with the
	// platform exactly as the Build's status.platforms entry spells it
	// (e.g. "linux/arm64"): the key of the entry the pod writes.
	PlatformAnnotation = "build.openshift.io/platform"

	// EmulationAnnotation on a Build (or a BuildConfig, whose Builds get
	// it) narrows which of its platforms may be built under emulation
	// when no node of their own architecture can build them, among those
	// build-controller's build.emulation permits: "Never" (none: such a
	// platform fails with NodePlatformNotFound), or a comma-separated list
	// of platforms (only those; this is also how a Build asks for a
	// platform the configuration emulates onRequest). Without it, a Build
	// may have every configured platform not marked onRequest emulated.
	// It never allows what the configuration does not.
	EmulationAnnotation = "build.openshift.io/emulation"

	// EmulationNever is the EmulationAnnotation value that refuses
	// emulation.
	EmulationNever = "Never"

	// BinaryInputReaderAnnotation is set to "only" on the copy of the
	// Build a build pod receives in BUILD when that pod is the only one to
	// read the Build's binary input (a Build of one platform, or a classic
	// build: no manifest-list pod): it removes the input's tag when it
	// ends. build-controller sets or removes it on every pod's copy, so a
	// value on the stored Build has no effect.
	BinaryInputReaderAnnotation = "build.archway.dev/binary-input-reader"
	// BinaryInputOnlyReader is BinaryInputReaderAnnotation's value.
	BinaryInputOnlyReader = "only"

	// IncrementalFromAnnotation is set, on the copy of an incremental
	// Source Build a platform's pod receives in BUILD, to the Build's
	// output (the index; the pod's own output is its platform's tag):
	// the pod's previous image is that index's child for its platform.
	// build-controller sets or removes it on every pod's copy, so a value
	// on the stored Build has no effect.
	IncrementalFromAnnotation = "build.archway.dev/incremental-from"

	// EmulationLabelPrefix starts the node label that says a node runs
	// binaries of an architecture under emulation:
	// emulation.archway.dev/<arch>=true (e.g. emulation.archway.dev/arm),
	// set by the binfmt DaemonSet (manifests/emulation) once qemu's
	// binfmt_misc handler for that architecture is registered with the F
	// flag, removed when it is not. An emulated platform's pod selects
	// it, so it never lands on a node without the handler.
	EmulationLabelPrefix = "emulation.archway.dev/"

	// PodRoleLabel is set on every build pod, saying what the pod does:
	// PodRoleBuild or PodRoleManifestList.
	PodRoleLabel = "build.openshift.io/pod-role"

	// PodRoleBuild is the PodRoleLabel value of a pod that builds (and
	// pushes) one platform's image, or the single pod of a single-platform
	// build.
	PodRoleBuild = "build"

	// PodRoleManifestList is the PodRoleLabel value of the pod that waits
	// for the platform pods, pushes the manifest list to output.to and
	// untags the per-platform images.
	PodRoleManifestList = "manifest-list"
)

// Build phases, the values of status.phase and status.platforms[].phase.
// A build moves New -> Pending -> Running -> one of Complete, Failed, Error
// or Cancelled, and never leaves a terminal phase.
const (
	// BuildPhaseNew is a build the controller has not acted on yet.
	BuildPhaseNew BuildPhase = "New"
	// BuildPhasePending is a build whose pods exist but have not all
	// started.
	BuildPhasePending BuildPhase = "Pending"
	// BuildPhaseRunning is a build with a running pod.
	BuildPhaseRunning BuildPhase = "Running"
	// BuildPhaseComplete is a build that succeeded: every platform not
	// allowed to fail is Complete and, with an output, the manifest list
	// was pushed.
	BuildPhaseComplete BuildPhase = "Complete"
	// BuildPhaseFailed is a build that failed because of what it builds
	// (its Dockerfile, its source, a platform not allowed to fail).
	BuildPhaseFailed BuildPhase = "Failed"
	// BuildPhaseError is a build that could not run because of the system
	// (pods could not be created, no node for a platform, ...).
	BuildPhaseError BuildPhase = "Error"
	// BuildPhaseCancelled is a build cancelled by a user or a run policy.
	BuildPhaseCancelled BuildPhase = "Cancelled"
)

// IsTerminal reports whether p is a phase a build never leaves.
func (p BuildPhase) IsTerminal() bool {
	switch p {
	case BuildPhaseComplete, BuildPhaseFailed, BuildPhaseError, BuildPhaseCancelled:
		return true
	}
	return false
}

// Reasons OpenShift's build controller and builder use, for status.reason
// and status.platforms[].reason.
const (
	// StatusReasonError is a generic error.
	StatusReasonError StatusReason = "Error"
	// StatusReasonCannotCreateBuildPodSpec: the pod spec could not be made.
	StatusReasonCannotCreateBuildPodSpec StatusReason = "CannotCreateBuildPodSpec"
	// StatusReasonCannotCreateBuildPod: the pod could not be created.
	StatusReasonCannotCreateBuildPod StatusReason = "CannotCreateBuildPod"
	// StatusReasonInvalidOutputReference: output.to cannot be used.
	StatusReasonInvalidOutputReference StatusReason = "InvalidOutputReference"
	// StatusReasonInvalidImageReference: an image reference cannot be used.
	StatusReasonInvalidImageReference StatusReason = "InvalidImageReference"
	// StatusReasonCancelBuildFailed: cancelling the build failed.
	StatusReasonCancelBuildFailed StatusReason = "CancelBuildFailed"
	// StatusReasonBuildPodDeleted: a build pod was deleted while it ran.
	StatusReasonBuildPodDeleted StatusReason = "BuildPodDeleted"
	// StatusReasonExceededRetryTimeout: the build did not start in time.
	StatusReasonExceededRetryTimeout StatusReason = "ExceededRetryTimeout"
	// StatusReasonMissingPushSecret: the push secret does not exist.
	StatusReasonMissingPushSecret StatusReason = "MissingPushSecret"
	// StatusReasonPostCommitHookFailed: the post-commit hook failed.
	StatusReasonPostCommitHookFailed StatusReason = "PostCommitHookFailed"
	// StatusReasonPushImageToRegistryFailed: pushing the image failed.
	StatusReasonPushImageToRegistryFailed StatusReason = "PushImageToRegistryFailed"
	// StatusReasonPullBuilderImageFailed: pulling the builder image failed.
	StatusReasonPullBuilderImageFailed StatusReason = "PullBuilderImageFailed"
	// StatusReasonFetchSourceFailed: fetching the source failed.
	StatusReasonFetchSourceFailed StatusReason = "FetchSourceFailed"
	// StatusReasonFetchImageContentFailed: extracting image content failed.
	StatusReasonFetchImageContentFailed StatusReason = "FetchImageContentFailed"
	// StatusReasonManageDockerfileFailed: the Dockerfile could not be
	// prepared.
	StatusReasonManageDockerfileFailed StatusReason = "ManageDockerfileFailed"
	// StatusReasonInvalidContextDirectory: contextDir is not in the source.
	StatusReasonInvalidContextDirectory StatusReason = "InvalidContextDirectory"
	// StatusReasonCancelledBuild: the build was cancelled.
	StatusReasonCancelledBuild StatusReason = "CancelledBuild"
	// StatusReasonDockerBuildFailed: the Dockerfile build failed.
	StatusReasonDockerBuildFailed StatusReason = "DockerBuildFailed"
	// StatusReasonBuildPodExists: a pod of the build's name already exists.
	StatusReasonBuildPodExists StatusReason = "BuildPodExists"
	// StatusReasonNoBuildContainerStatus: the pod reported no container
	// status.
	StatusReasonNoBuildContainerStatus StatusReason = "NoBuildContainerStatus"
	// StatusReasonFailedContainer: a build container failed.
	StatusReasonFailedContainer StatusReason = "FailedContainer"
	// StatusReasonUnresolvableEnvironmentVariable: an env var's source is
	// missing.
	StatusReasonUnresolvableEnvironmentVariable StatusReason = "UnresolvableEnvironmentVariable"
	// StatusReasonGenericBuildFailed: the build failed for another reason.
	StatusReasonGenericBuildFailed StatusReason = "GenericBuildFailed"
	// StatusReasonOutOfMemoryKilled: a build container ran out of memory.
	StatusReasonOutOfMemoryKilled StatusReason = "OutOfMemoryKilled"
	// StatusReasonCannotRetrieveServiceAccount: the service account is
	// missing.
	StatusReasonCannotRetrieveServiceAccount StatusReason = "CannotRetrieveServiceAccount"
	// StatusReasonBuildPodEvicted: a build pod was evicted.
	StatusReasonBuildPodEvicted StatusReason = "BuildPodEvicted"
)

// Reasons archway adds for multi-platform builds (the first three are
// Shipwright's words for the same cases).
const (
	// StatusReasonInvalidPlatform: a target platform is not a platform
	// archway knows (e.g. linux/aarch64: the Go name is arm64). The message
	// says what to write instead. Admission already checks the shape.
	StatusReasonInvalidPlatform StatusReason = "InvalidPlatform"
	// StatusReasonNodePlatformNotFound: no schedulable node has a target
	// platform's os and architecture.
	StatusReasonNodePlatformNotFound StatusReason = "NodePlatformNotFound"
	// StatusReasonNodeSelectorPlatformConflict: spec.nodeSelector names a
	// kubernetes.io/os or kubernetes.io/arch other than a target
	// platform's.
	StatusReasonNodeSelectorPlatformConflict StatusReason = "NodeSelectorPlatformConflict"
	// StatusReasonBaseImagePlatformNotFound: a base image known before any
	// pod (dockerStrategy.from, an inline Dockerfile's FROMs) has no image
	// for a target platform; the message names the missing platforms and
	// those the image has.
	StatusReasonBaseImagePlatformNotFound StatusReason = "BaseImagePlatformNotFound"
	// StatusReasonPlatformBuildFailed: the build of a platform not in
	// platformsAllowedToFail failed; status.platforms says which and why.
	StatusReasonPlatformBuildFailed StatusReason = "PlatformBuildFailed"
	// StatusReasonManifestListFailed: the manifest list could not be
	// assembled or pushed.
	StatusReasonManifestListFailed StatusReason = "ManifestListFailed"
	// StatusReasonPlatformVersionSkew: a platform's pod finished without
	// writing its status.platforms entry (an older builder that wrote the
	// build's own status instead), so its image cannot be listed.
	StatusReasonPlatformVersionSkew StatusReason = "PlatformVersionSkew"
	// StatusReasonUnsupportedBuildStrategy: the strategy is one archway
	// does not run yet (Source).
	StatusReasonUnsupportedBuildStrategy StatusReason = "UnsupportedBuildStrategy"
	// StatusReasonMissingTrustedCABundle: the Build sets mountTrustedCA,
	// and the trusted CA bundle the build controller's configuration
	// names (build.trustedCA) is not configured, or its ConfigMap or key
	// is missing in the Build's namespace.
	StatusReasonMissingTrustedCABundle StatusReason = "MissingTrustedCABundle"
	// StatusReasonUserNamespaceIgnored: an unprivileged build pod found
	// itself in the node's user namespace: the node's container runtime
	// ignored hostUsers: false, so the builder refused to build.
	StatusReasonUserNamespaceIgnored StatusReason = "UserNamespaceIgnored"
	// StatusReasonPodSecurityForbidsBuildPod: the namespace's Pod Security
	// level (baseline or restricted) refused a build pod, which adds
	// SYS_ADMIN inside its user namespace; the message names what to
	// change.
	StatusReasonPodSecurityForbidsBuildPod StatusReason = "PodSecurityForbidsBuildPod"
)

// Condition types archway sets besides OpenShift's one-per-phase
// conditions (whose type is the phase name).
const (
	// BuildConditionNoOutput is True on a build without spec.output.to: its
	// images are built and discarded, and no manifest list is pushed. The
	// reason is ReasonNoOutputReference.
	BuildConditionNoOutput BuildConditionType = "NoOutput"

	// ReasonNoOutputReference is the reason of the NoOutput condition.
	ReasonNoOutputReference = "NoOutputReference"

	// BuildConditionPlatformTagsRemoved follows the removal of the
	// per-platform tags of a multi-platform build that ended Failed, Error
	// or Cancelled, so no manifest list replaced them. The tags are removed
	// by the manifest-list pod, created only once every platform pod has
	// ended (a pod still running may finish a push after any earlier
	// removal). False with ReasonWaitingForBuildPods while platform pods
	// run (the message names them); Unknown with ReasonRemovingPlatformTags
	// once the pod is created; then True with ReasonPlatformTagsRemoved, or
	// False with ReasonRemovingPlatformTagsFailed and the registry's error.
	BuildConditionPlatformTagsRemoved BuildConditionType = "PlatformTagsRemoved"

	// Reasons of the PlatformTagsRemoved condition.
	ReasonWaitingForBuildPods        = "WaitingForBuildPods"
	ReasonRemovingPlatformTags       = "RemovingPlatformTags"
	ReasonPlatformTagsRemoved        = "PlatformTagsRemoved"
	ReasonRemovingPlatformTagsFailed = "RemovingPlatformTagsFailed"
)

// Event reasons the build controller records on Builds, OpenShift's.
const (
	// EventReasonBuildStarted: the build's first pod started.
	EventReasonBuildStarted = "BuildStarted"
	// EventReasonBuildCompleted: the build reached Complete.
	EventReasonBuildCompleted = "BuildCompleted"
	// EventReasonBuildFailed: the build reached Failed or Error.
	EventReasonBuildFailed = "BuildFailed"
	// EventReasonBuildCancelled: the build reached Cancelled.
	EventReasonBuildCancelled = "BuildCancelled"
)

// Event reasons of archway's own.
const (
	// EventReasonPlatformEmulated: no node of a platform's own
	// architecture can build it, and its pod builds it under emulation on
	// a node of another architecture (build.emulation).
	EventReasonPlatformEmulated = "PlatformEmulated"
	// EventReasonBaseImageCheckSkipped: a base image known before any pod
	// could not be inspected (registry unreachable, credentials refused,
	// ...): the build goes on and each platform's pod checks its base.
	EventReasonBaseImageCheckSkipped = "BaseImageCheckSkipped"
	// EventReasonRemovingPlatformTags: a multi-platform build ended without
	// a manifest list and every platform pod has ended; the manifest-list
	// pod was created to remove the per-platform tags.
	EventReasonRemovingPlatformTags = "RemovingPlatformTags"
)

// Keys and environment variables shared with OpenShift's tools.
const (
	// WebHookSecretKey is the key of the Secret a webhook trigger's
	// secretReference names that holds the webhook's secret.
	WebHookSecretKey = "WebHookSecretKey"

	// BuildEnv is the environment variable that hands a build pod its
	// Build as JSON. For a multi-platform build, spec.platforms holds only
	// the pod's own platform.
	BuildEnv = "BUILD"

	// PushDockerConfigPathEnv names the directory of the mounted docker
	// config file with the push credentials.
	PushDockerConfigPathEnv = "PUSH_DOCKERCFG_PATH"

	// PullDockerConfigPathEnv names the directory of the mounted docker
	// config file with the pull credentials.
	PullDockerConfigPathEnv = "PULL_DOCKERCFG_PATH"

	// AccountDockerConfigPathEnv names the directory of the build service
	// account's image pull secrets, one directory per secret in the
	// account's order, mounted when the Build names no push or no pull
	// secret: the credentials it pushes or pulls with then, as OpenShift
	// uses the builder account's docker secrets.
	AccountDockerConfigPathEnv = "ACCOUNT_DOCKERCFG_PATH"

	// RegistriesConfEnv hands a build pod the cluster's registry
	// configuration as build-controller generates it for placement and
	// builds: a registries.conf (containers-registries.conf(5), version 2)
	// of mirrors, blocked and insecure registries. Unset: none.
	RegistriesConfEnv = "ARCHWAY_REGISTRIES_CONF"

	// AllowedRegistriesEnv hands a build pod the only registry scopes
	// images may come from (OpenShift's image config allowedRegistries),
	// comma-separated: every other registry is refused, mirrors or not.
	// Unset: every registry not blocked.
	AllowedRegistriesEnv = "ARCHWAY_ALLOWED_REGISTRIES"

	// RegistryCertDirEnv hands a build pod a directory of registry CA
	// certificates, <dir>/<host[:port]>/ca.crt (the layout of
	// /etc/containers/certs.d), trusted besides the system's roots for
	// pulls and pushes. Unset: containers/image's default directories.
	RegistryCertDirEnv = "ARCHWAY_REGISTRY_CERT_DIR"

	// StrategyEnvValueFromPrefix and StrategyBuildArgValueFromPrefix name
	// the build container's environment variables that carry the values of
	// a Docker strategy's env[i] and buildArgs[i] with a valueFrom:
	// <prefix><i>, set by the pod's own valueFrom (the kubelet resolves the
	// ConfigMap or Secret key; build-controller never reads the value).
	StrategyEnvValueFromPrefix      = "ARCHWAY_STRATEGY_ENV_"
	StrategyBuildArgValueFromPrefix = "ARCHWAY_STRATEGY_BUILD_ARG_"
)
