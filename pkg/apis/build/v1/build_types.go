package v1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Build is one run of a build: the source, strategy and output it was
// created with, and what happened. A multi-platform Build runs one pod per
// target platform and, when it has an output, one more that pushes the
// manifest list.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=builds,singular=build,scope=Namespaced,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.strategy.type`,description="The build strategy."
// +kubebuilder:printcolumn:name="From",type=string,JSONPath=`.spec.source.type`,description="The kind of source."
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`,description="The build's phase."
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startTimestamp`,description="When the build started."
// +kubebuilder:printcolumn:name="Duration",type=string,JSONPath=`.status.durationSummary`,description="How long the build ran (status.durationSummary)."
// +kubebuilder:printcolumn:name="Platforms",type=string,JSONPath=`.status.platformsSummary`,description="Platforms complete out of platforms targeted (status.platformsSummary)."
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,priority=1,description="Why the build is in its phase."
type Build struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what to build. Required. Immutable once the Build exists, as
	// in OpenShift: only spec.revision may be set (once, when it was unset)
	// and spec.output.pushSecret may change.
	// +required
	Spec BuildSpec `json:"spec"`

	// status is what happened. Written by the controller and the build
	// pods; default: phase New.
	// +optional
	// +kubebuilder:default={}
	Status BuildStatus `json:"status,omitempty"`
}

// BuildSpec is what a Build builds.
//
// The immutability rule below lists every field of BuildSpec: a field added
// to BuildSpec or CommonSpec must be added to it (a unit test checks this).
//
// +kubebuilder:validation:XValidation:rule=`(has(self.serviceAccount) ? has(oldSelf.serviceAccount) && self.serviceAccount == oldSelf.serviceAccount : !has(oldSelf.serviceAccount)) && (has(self.source) ? has(oldSelf.source) && self.source == oldSelf.source : !has(oldSelf.source)) && (!has(oldSelf.revision) || has(self.revision) && self.revision == oldSelf.revision) && self.strategy == oldSelf.strategy && (has(self.output) && has(self.output.to) ? has(oldSelf.output) && has(oldSelf.output.to) && self.output.to == oldSelf.output.to : !has(oldSelf.output) || !has(oldSelf.output.to)) && (has(self.output) && has(self.output.imageLabels) ? has(oldSelf.output) && has(oldSelf.output.imageLabels) && self.output.imageLabels == oldSelf.output.imageLabels : !has(oldSelf.output) || !has(oldSelf.output.imageLabels)) && (has(self.resources) ? has(oldSelf.resources) && self.resources == oldSelf.resources : !has(oldSelf.resources)) && (has(self.postCommit) ? has(oldSelf.postCommit) && self.postCommit == oldSelf.postCommit : !has(oldSelf.postCommit)) && (has(self.completionDeadlineSeconds) ? has(oldSelf.completionDeadlineSeconds) && self.completionDeadlineSeconds == oldSelf.completionDeadlineSeconds : !has(oldSelf.completionDeadlineSeconds)) && (has(self.nodeSelector) ? has(oldSelf.nodeSelector) && self.nodeSelector == oldSelf.nodeSelector : !has(oldSelf.nodeSelector)) && (has(self.mountTrustedCA) ? has(oldSelf.mountTrustedCA) && self.mountTrustedCA == oldSelf.mountTrustedCA : !has(oldSelf.mountTrustedCA)) && (has(self.platforms) ? has(oldSelf.platforms) && self.platforms == oldSelf.platforms : !has(oldSelf.platforms)) && (has(self.platformsAllowedToFail) ? has(oldSelf.platformsAllowedToFail) && self.platformsAllowedToFail == oldSelf.platformsAllowedToFail : !has(oldSelf.platformsAllowedToFail)) && (has(self.triggeredBy) ? has(oldSelf.triggeredBy) && self.triggeredBy == oldSelf.triggeredBy : !has(oldSelf.triggeredBy))`,message="spec is immutable once the Build exists; only spec.revision may be set (once) and spec.output.pushSecret may change"
type BuildSpec struct {
	// CommonSpec holds what a Build shares with a BuildConfig.
	CommonSpec `json:",inline"`

	// triggeredBy says what started the build (a webhook, an image change,
	// a config change, or a user). Default: none.
	// +optional
	// +listType=atomic
	TriggeredBy []BuildTriggerCause `json:"triggeredBy,omitempty"`
}

// BuildTriggerCause is one reason a build started.
type BuildTriggerCause struct {
	// message describes the cause in words, e.g. "Manually triggered".
	// Default: empty.
	// +optional
	Message string `json:"message,omitempty"`

	// genericWebHook is set when a generic webhook started the build.
	// +optional
	GenericWebHook *GenericWebHookCause `json:"genericWebHook,omitempty"`

	// githubWebHook is set when a GitHub webhook started the build.
	// +optional
	GitHubWebHook *GitHubWebHookCause `json:"githubWebHook,omitempty"`

	// imageChangeBuild is set when an image change started the build.
	// +optional
	ImageChangeBuild *ImageChangeCause `json:"imageChangeBuild,omitempty"`

	// gitlabWebHook is set when a GitLab webhook started the build.
	// +optional
	GitLabWebHook *GitLabWebHookCause `json:"gitlabWebHook,omitempty"`

	// bitbucketWebHook is set when a Bitbucket webhook started the build.
	// +optional
	BitbucketWebHook *BitbucketWebHookCause `json:"bitbucketWebHook,omitempty"`
}

// GenericWebHookCause is a build started by a generic webhook.
type GenericWebHookCause struct {
	// revision is the source revision the webhook named. Default: unset.
	// +optional
	Revision *SourceRevision `json:"revision,omitempty"`

	// secret is the (obfuscated) secret of the webhook that was called.
	// Default: empty.
	// +optional
	Secret string `json:"secret,omitempty"`
}

// GitHubWebHookCause is a build started by a GitHub webhook.
type GitHubWebHookCause struct {
	// revision is the source revision the webhook named. Default: unset.
	// +optional
	Revision *SourceRevision `json:"revision,omitempty"`

	// secret is the (obfuscated) secret of the webhook that was called.
	// Default: empty.
	// +optional
	Secret string `json:"secret,omitempty"`
}

// CommonWebHookCause is what GitLab and Bitbucket webhook causes hold.
type CommonWebHookCause struct {
	// revision is the source revision the webhook named. Default: unset.
	// +optional
	Revision *SourceRevision `json:"revision,omitempty"`

	// secret is the (obfuscated) secret of the webhook that was called.
	// Default: empty.
	// +optional
	Secret string `json:"secret,omitempty"`
}

// GitLabWebHookCause is a build started by a GitLab webhook.
type GitLabWebHookCause struct {
	// CommonWebHookCause holds the revision and secret.
	CommonWebHookCause `json:",inline"`
}

// BitbucketWebHookCause is a build started by a Bitbucket webhook.
type BitbucketWebHookCause struct {
	// CommonWebHookCause holds the revision and secret.
	CommonWebHookCause `json:",inline"`
}

// ImageChangeCause is a build started by a new image.
type ImageChangeCause struct {
	// imageID is the image that started the build. Default: empty.
	// +optional
	ImageID string `json:"imageID,omitempty"`

	// fromRef is the reference whose image changed. Default: unset.
	// +optional
	FromRef *corev1.ObjectReference `json:"fromRef,omitempty"`
}

// BuildPhase is where a build is in its life: New, Pending, Running, then
// one of the terminal phases Complete, Failed, Error or Cancelled.
type BuildPhase string

// BuildStatus is what happened to a Build. The fields OpenShift defines keep
// their meaning; for a multi-platform build they describe the whole build
// (phase is the aggregate of the platforms' phases, output.to.imageDigest is
// the manifest list's digest) and status.platforms describes each platform.
type BuildStatus struct {
	// phase is where the build is: New, Pending, Running, Complete, Failed,
	// Error or Cancelled. Default: New. Once Complete, Failed, Error or
	// Cancelled it cannot change.
	// +optional
	// +kubebuilder:default=New
	// +kubebuilder:validation:Enum=New;Pending;Running;Complete;Failed;Error;Cancelled
	// +kubebuilder:validation:XValidation:rule=`!(oldSelf in ['Complete', 'Failed', 'Error', 'Cancelled']) || self == oldSelf`,messageExpression=`'phase cannot change once it is ' + oldSelf`
	Phase BuildPhase `json:"phase,omitempty"`

	// cancelled asks the controller to cancel the build. Default: false.
	// +optional
	Cancelled bool `json:"cancelled,omitempty"`

	// reason is a CamelCase word saying why the build is in its phase; see
	// the StatusReason constants. Default: empty.
	// +optional
	Reason StatusReason `json:"reason,omitempty"`

	// message says the same as reason, for people. Default: empty.
	// +optional
	Message string `json:"message,omitempty"`

	// startTimestamp is when the first build pod started running.
	// Default: unset.
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`

	// completionTimestamp is when the build reached a terminal phase.
	// Default: unset.
	// +optional
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`

	// duration is how long the build ran, in nanoseconds (OpenShift's
	// encoding of a Go time.Duration). Default: 0.
	// +optional
	Duration time.Duration `json:"duration,omitempty"`

	// outputDockerImageReference is the pull spec the image (for a
	// multi-platform build, the manifest list) was pushed to. Default: empty.
	// +optional
	OutputDockerImageReference string `json:"outputDockerImageReference,omitempty"`

	// config refers to the BuildConfig the build was started from.
	// Default: unset.
	// +optional
	Config *corev1.ObjectReference `json:"config,omitempty"`

	// output describes the pushed image (for a multi-platform build, the
	// manifest list). Default: empty.
	// +optional
	Output BuildStatusOutput `json:"output,omitempty"`

	// stages are the build's stages and steps with their timings.
	// Default: none.
	// +optional
	// +listType=atomic
	Stages []StageInfo `json:"stages,omitempty"`

	// logSnippet is the end of the failing pod's log. Default: empty.
	// +optional
	LogSnippet string `json:"logSnippet,omitempty"`

	// conditions are the build's conditions: one per phase the build has
	// been in (type = phase, status True for the current one, as OpenShift
	// keeps them), plus NoOutput. Default: none.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []BuildCondition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// platforms hold one entry per target platform, keyed by platform. The
	// controller creates an entry for each platform the build resolved to;
	// each build pod then writes its own entry with server-side apply under
	// its own field manager, so concurrent writers never overwrite each
	// other. Default: none (a single-platform build). At most 64 entries:
	// a bound on the object's size, not on the number of platforms, which
	// spec.platforms and the controller keep to 16.
	// +optional
	// +listType=map
	// +listMapKey=platform
	// +kubebuilder:validation:MaxItems=64
	Platforms []BuildStatusPlatform `json:"platforms,omitempty"`

	// platformsSummary is "<complete>/<targeted>": how many entries of
	// platforms are Complete out of how many there are (e.g. "3/4"). The
	// controller writes it with the phases, for the Platforms column of
	// kubectl get builds. Default: empty (a single-platform build).
	// +optional
	// +kubebuilder:validation:MaxLength=16
	PlatformsSummary string `json:"platformsSummary,omitempty"`

	// durationSummary is duration as people read it (e.g. "1m32s"),
	// written by the controller with duration, for the Duration column of
	// kubectl get builds. Default: empty.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	DurationSummary string `json:"durationSummary,omitempty"`

	// podUID is the UID of the pod the openshift.io/build.pod-name
	// annotation names (the manifest-list pod of a multi-platform build,
	// the pod of a classic build), recorded by build-controller once it has
	// created that pod: the archway-build-status-writers policy lets only
	// the pod with this UID write the Build's output, reason, message, log
	// snippet, stages and conditions, so a pod that merely has the name
	// cannot. An archway extension. Default: empty (no pod yet).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PodUID string `json:"podUID,omitempty"`
}

// BuildStatusPlatform is what happened to one target platform of a
// multi-platform build. Its writer is the platform's build pod (and the
// controller, for the phase before the pod runs); each applies only this
// entry with server-side apply.
type BuildStatusPlatform struct {
	// platform is the target platform as spec.platforms (or the resolved
	// list) spells it, e.g. "linux/arm64". Required; the key of the list.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Platform string `json:"platform"`

	// phase is where this platform's build is: New, Pending, Running,
	// Complete, Failed, Error or Cancelled. Default: empty (not started).
	// +optional
	// +kubebuilder:validation:Enum=New;Pending;Running;Complete;Failed;Error;Cancelled
	Phase BuildPhase `json:"phase,omitempty"`

	// reason is a CamelCase word saying why the platform is in its phase;
	// see the StatusReason constants. Default: empty.
	// +optional
	Reason StatusReason `json:"reason,omitempty"`

	// message says the same as reason, for people. Default: empty.
	// +optional
	Message string `json:"message,omitempty"`

	// podName is the name of the pod building this platform. Default:
	// empty.
	// +optional
	PodName string `json:"podName,omitempty"`

	// podUID is the UID of podName's pod, recorded by build-controller once
	// it has created the pod: the archway-build-status-writers policy lets
	// only the pod with this UID write this entry, so a pod that merely has
	// the name cannot. An archway extension. Default: empty (no pod yet).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PodUID string `json:"podUID,omitempty"`

	// emulatedOn is the architecture (kubernetes.io/arch) of the nodes
	// this platform's pod runs on when it is built under emulation (qemu
	// user-mode), because no Ready schedulable node of its own
	// architecture could build it and build-controller's build.emulation
	// allows it. Set by the controller when it resolves the platforms.
	// Default: empty (built natively).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	EmulatedOn string `json:"emulatedOn,omitempty"`

	// startTimestamp is when this platform's pod started running. Default:
	// unset.
	// +optional
	StartTimestamp *metav1.Time `json:"startTimestamp,omitempty"`

	// completionTimestamp is when this platform's build ended. Default:
	// unset.
	// +optional
	CompletionTimestamp *metav1.Time `json:"completionTimestamp,omitempty"`

	// outputDockerImageReference is the pull spec this platform's image was
	// pushed to (a tag of its own in output.to's repository, untagged once
	// the manifest list is pushed). Default: empty.
	// +optional
	OutputDockerImageReference string `json:"outputDockerImageReference,omitempty"`

	// output is what the manifest list entry for this platform needs.
	// Default: unset (nothing pushed yet).
	// +optional
	Output *BuildStatusPlatformOutput `json:"output,omitempty"`

	// commit is the Git commit this platform's pod checked out and built:
	// spec.revision.git.commit, which the first platform to fetch the
	// source records for every other. The manifest-list pod refuses to list
	// platforms whose commits differ. Default: empty (not fetched yet, or
	// the source is not Git). A full hash, at most 64 characters.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Commit string `json:"commit,omitempty"`

	// logSnippet is the end of this platform's pod log when it failed.
	// Default: empty.
	// +optional
	LogSnippet string `json:"logSnippet,omitempty"`
}

// BuildStatusPlatformOutput describes one platform's pushed image: the
// descriptor and the OCI image-spec platform of its manifest list entry.
type BuildStatusPlatformOutput struct {
	// imageDigest is the digest of the image manifest pushed for this
	// platform, e.g. "sha256:...". Default: empty.
	// +optional
	ImageDigest string `json:"imageDigest,omitempty"`

	// mediaType is the media type of that manifest (OCI or Docker schema
	// 2). Default: empty, meaning read it from the registry.
	// +optional
	MediaType string `json:"mediaType,omitempty"`

	// size is the size of that manifest in bytes. Default: 0, meaning read
	// it from the registry.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Size int64 `json:"size,omitempty"`

	// os is the image's operating system, as the image config says it
	// (e.g. "linux"). Default: empty.
	// +optional
	OS string `json:"os,omitempty"`

	// architecture is the image's CPU architecture, as the image config
	// says it (e.g. "arm64"). Default: empty.
	// +optional
	Architecture string `json:"architecture,omitempty"`

	// variant is the CPU variant, as the image config says it (e.g. "v8").
	// Default: empty.
	// +optional
	Variant string `json:"variant,omitempty"`

	// os.version is the operating system version, for the OSes that have
	// one (Windows). Default: empty.
	// +optional
	OSVersion string `json:"os.version,omitempty"`

	// os.features are operating system features the image needs (Windows).
	// Default: none.
	// +optional
	// +listType=atomic
	OSFeatures []string `json:"os.features,omitempty"`
}

// StageInfo is one stage of a build with its timing.
type StageInfo struct {
	// name is the stage: FetchInputs, PullImages, Build, PostCommit or
	// PushImage. Default: empty.
	// +optional
	Name StageName `json:"name,omitempty"`

	// startTime is when the stage started. Default: unset.
	// +optional
	// +nullable
	StartTime metav1.Time `json:"startTime,omitempty"`

	// durationMilliseconds is how long the stage took. Default: 0.
	// +optional
	DurationMilliseconds int64 `json:"durationMilliseconds,omitempty"`

	// steps are the stage's steps. Default: none.
	// +optional
	// +listType=atomic
	Steps []StepInfo `json:"steps,omitempty"`
}

// StageName names a stage of a build.
type StageName string

// The stages OpenShift's builder reports.
const (
	// StageFetchInputs fetches the source and other inputs.
	StageFetchInputs StageName = "FetchInputs"
	// StagePullImages pulls the images the build needs.
	StagePullImages StageName = "PullImages"
	// StageBuild builds the image.
	StageBuild StageName = "Build"
	// StagePostCommit runs the post-commit hook.
	StagePostCommit StageName = "PostCommit"
	// StagePushImage pushes the image.
	StagePushImage StageName = "PushImage"
)

// StepInfo is one step of a stage with its timing.
type StepInfo struct {
	// name is the step, e.g. FetchGitSource or DockerBuild. Default: empty.
	// +optional
	Name StepName `json:"name,omitempty"`

	// startTime is when the step started. Default: unset.
	// +optional
	// +nullable
	StartTime metav1.Time `json:"startTime,omitempty"`

	// durationMilliseconds is how long the step took. Default: 0.
	// +optional
	DurationMilliseconds int64 `json:"durationMilliseconds,omitempty"`
}

// StepName names a step of a build stage.
type StepName string

// The steps OpenShift's builder reports.
const (
	// StepExecPostCommitHook runs the post-commit hook.
	StepExecPostCommitHook StepName = "RunPostCommitHook"
	// StepFetchGitSource clones the Git source.
	StepFetchGitSource StepName = "FetchGitSource"
	// StepPullBaseImage pulls the base image.
	StepPullBaseImage StepName = "PullBaseImage"
	// StepPullInputImage pulls an input image.
	StepPullInputImage StepName = "PullInputImage"
	// StepPushImage pushes the image.
	StepPushImage StepName = "PushImage"
	// StepPushDockerImage pushes the image to a registry.
	StepPushDockerImage StepName = "PushDockerImage"
	// StepDockerBuild builds the Dockerfile.
	StepDockerBuild StepName = "DockerBuild"
)

// BuildConditionType names a build condition.
type BuildConditionType string

// BuildCondition is one condition of a build, in OpenShift's shape (with
// lastUpdateTime, which metav1.Condition does not have).
type BuildCondition struct {
	// type is the condition: a phase name, or NoOutput. Required.
	// +kubebuilder:validation:MinLength=1
	Type BuildConditionType `json:"type"`

	// status is True, False or Unknown. Required.
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status corev1.ConditionStatus `json:"status"`

	// lastUpdateTime is when the condition was last written. Default:
	// unset.
	// +optional
	// +nullable
	LastUpdateTime metav1.Time `json:"lastUpdateTime,omitempty"`

	// lastTransitionTime is when status last changed. Default: unset.
	// +optional
	// +nullable
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`

	// reason is a CamelCase word saying why. Default: empty.
	// +optional
	Reason string `json:"reason,omitempty"`

	// message says why, for people. Default: empty.
	// +optional
	Message string `json:"message,omitempty"`
}

// StatusReason is a CamelCase word saying why a build (or one of its
// platforms) is in its phase. The values are in well_known.go.
type StatusReason string

// BuildStatusOutput describes the pushed image of a build.
type BuildStatusOutput struct {
	// to describes the image pushed to spec.output.to. Default: unset.
	// +optional
	To *BuildStatusOutputTo `json:"to,omitempty"`
}

// BuildStatusOutputTo describes the image pushed to spec.output.to.
type BuildStatusOutputTo struct {
	// imageDigest is the digest of what was pushed: the image manifest, or
	// for a multi-platform build the manifest list. Default: empty.
	// +optional
	ImageDigest string `json:"imageDigest,omitempty"`
}

// BuildList is a list of Builds.
//
// +kubebuilder:object:root=true
type BuildList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the Builds.
	Items []Build `json:"items"`
}
