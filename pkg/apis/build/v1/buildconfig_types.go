package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BuildConfig is a template for Builds and the triggers that start them. A
// Build started from it is named "<buildconfig>-<n>", n being
// status.lastVersion after the start.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=buildconfigs,singular=buildconfig,shortName=bc,scope=Namespaced,categories=all
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.strategy.type`,description="The build strategy."
// +kubebuilder:printcolumn:name="From",type=string,JSONPath=`.spec.source.type`,description="The kind of source."
// +kubebuilder:printcolumn:name="Latest",type=integer,JSONPath=`.status.lastVersion`,description="The number of the latest build."
type BuildConfig struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the template of the builds and their triggers. Required;
	// mutable (a change applies to builds started after it).
	// +required
	Spec BuildConfigSpec `json:"spec"`

	// status is written by the controller. Default: lastVersion 0.
	// +optional
	// +kubebuilder:default={}
	Status BuildConfigStatus `json:"status"`
}

// BuildConfigSpec is the template of a BuildConfig's builds and their
// triggers.
//
// +kubebuilder:validation:XValidation:rule=`!has(self.triggers) || !self.triggers.exists(t, t.type == 'ImageChange' && has(t.imageChange) && !has(t.imageChange.from)) || has(self.strategy.sourceStrategy) || (has(self.strategy.dockerStrategy) && has(self.strategy.dockerStrategy.from)) || has(self.source.dockerfile)`,message="an ImageChange trigger without imageChange.from watches the strategy's from, or the last FROM of an inline Dockerfile (source.dockerfile): set one of them, or imageChange.from (a Dockerfile read from the Git repository or a binary input is known only inside the build pod)",fieldPath=`.triggers`
type BuildConfigSpec struct {
	// triggers start builds: on a webhook call (GitHub, GitLab, Bitbucket,
	// Generic), on a new base image (ImageChange), or when the BuildConfig
	// is created (ConfigChange). Default: none (builds start by hand).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Triggers []BuildTriggerPolicy `json:"triggers,omitempty"`

	// runPolicy says how builds of this BuildConfig run relative to each
	// other: Serial (one at a time, in order), SerialLatestOnly (one at a
	// time, skipping to the newest queued) or Parallel. Default: Serial.
	// +optional
	// +kubebuilder:default=Serial
	// +kubebuilder:validation:Enum=Serial;SerialLatestOnly;Parallel
	RunPolicy BuildRunPolicy `json:"runPolicy,omitempty"`

	// CommonSpec is the template of each Build's spec.
	CommonSpec `json:",inline"`

	// successfulBuildsHistoryLimit is how many completed builds are kept.
	// Default: 5. Must be at least 0.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=0
	SuccessfulBuildsHistoryLimit *int32 `json:"successfulBuildsHistoryLimit,omitempty"`

	// failedBuildsHistoryLimit is how many failed, errored or cancelled
	// builds are kept. Default: 5. Must be at least 0.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=0
	FailedBuildsHistoryLimit *int32 `json:"failedBuildsHistoryLimit,omitempty"`
}

// BuildRunPolicy says how the builds of a BuildConfig run relative to each
// other.
type BuildRunPolicy string

// The run policies.
const (
	// BuildRunPolicyParallel runs builds as soon as they are created.
	BuildRunPolicyParallel BuildRunPolicy = "Parallel"
	// BuildRunPolicySerial runs builds one at a time in creation order.
	BuildRunPolicySerial BuildRunPolicy = "Serial"
	// BuildRunPolicySerialLatestOnly runs builds one at a time, cancelling
	// queued builds older than the newest.
	BuildRunPolicySerialLatestOnly BuildRunPolicy = "SerialLatestOnly"
)

// BuildConfigStatus is what the controller knows of a BuildConfig.
type BuildConfigStatus struct {
	// lastVersion is the number of the latest build started from this
	// BuildConfig. Default: 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	LastVersion int64 `json:"lastVersion"`

	// imageChangeTriggers record, per ImageChange trigger, the image that
	// last started a build. Default: none.
	// +optional
	// +listType=atomic
	ImageChangeTriggers []ImageChangeTriggerStatus `json:"imageChangeTriggers,omitempty"`
}

// BuildTriggerType names a kind of trigger.
type BuildTriggerType string

// The trigger types. OpenShift's deprecated lowercase spellings are not
// accepted.
const (
	// GitHubWebHookBuildTriggerType starts a build on a GitHub push event.
	GitHubWebHookBuildTriggerType BuildTriggerType = "GitHub"
	// GenericWebHookBuildTriggerType starts a build on a generic webhook call.
	GenericWebHookBuildTriggerType BuildTriggerType = "Generic"
	// GitLabWebHookBuildTriggerType starts a build on a GitLab push event.
	GitLabWebHookBuildTriggerType BuildTriggerType = "GitLab"
	// BitbucketWebHookBuildTriggerType starts a build on a Bitbucket push
	// event.
	BitbucketWebHookBuildTriggerType BuildTriggerType = "Bitbucket"
	// ImageChangeBuildTriggerType starts a build when an image changes.
	ImageChangeBuildTriggerType BuildTriggerType = "ImageChange"
	// ConfigChangeBuildTriggerType starts a build when the BuildConfig is
	// created.
	ConfigChangeBuildTriggerType BuildTriggerType = "ConfigChange"
)

// BuildTriggerPolicy is one trigger of a BuildConfig.
//
// +kubebuilder:validation:XValidation:rule=`self.type == 'GitHub' ? has(self.github) : self.type == 'GitLab' ? has(self.gitlab) : self.type == 'Bitbucket' ? has(self.bitbucket) : self.type == 'Generic' ? has(self.generic) : self.type == 'ImageChange' ? has(self.imageChange) : true`,messageExpression=`'type ' + self.type + ' needs the ' + {'GitHub': 'github', 'GitLab': 'gitlab', 'Bitbucket': 'bitbucket', 'Generic': 'generic', 'ImageChange': 'imageChange'}[self.type] + ' field'`
type BuildTriggerPolicy struct {
	// type is the trigger: GitHub, GitLab, Bitbucket, Generic, ImageChange
	// or ConfigChange. Required; the field of the same name (github,
	// gitlab, bitbucket, generic, imageChange) must be set with it.
	// +kubebuilder:validation:Enum=GitHub;GitLab;Bitbucket;Generic;ImageChange;ConfigChange
	Type BuildTriggerType `json:"type"`

	// github configures a GitHub webhook. Default: unset.
	// +optional
	GitHubWebHook *WebHookTrigger `json:"github,omitempty"`

	// generic configures a generic webhook. Default: unset.
	// +optional
	GenericWebHook *WebHookTrigger `json:"generic,omitempty"`

	// imageChange configures an image change trigger. Default: unset.
	// +optional
	ImageChange *ImageChangeTrigger `json:"imageChange,omitempty"`

	// gitlab configures a GitLab webhook. Default: unset.
	// +optional
	GitLabWebHook *WebHookTrigger `json:"gitlab,omitempty"`

	// bitbucket configures a Bitbucket webhook. Default: unset.
	// +optional
	BitbucketWebHook *WebHookTrigger `json:"bitbucket,omitempty"`
}

// WebHookTrigger configures a webhook that starts builds. Its URL is
// .../buildconfigs/<name>/webhooks/<secret>/<type>.
//
// +kubebuilder:validation:XValidation:rule=`(has(self.secret) && self.secret != "") || has(self.secretReference)`,message="set secretReference (a Secret holding the key WebHookSecretKey), or the deprecated secret"
type WebHookTrigger struct {
	// secret is the webhook's secret in clear text. Deprecated: use
	// secretReference. Default: empty.
	// +optional
	Secret string `json:"secret,omitempty"`

	// allowEnv lets a generic webhook's payload set environment variables
	// of the build. Default: false.
	// +optional
	AllowEnv bool `json:"allowEnv,omitempty"`

	// secretReference names a Secret in the BuildConfig's namespace whose
	// key WebHookSecretKey holds the webhook's secret. Default: unset.
	// +optional
	SecretReference *SecretLocalReference `json:"secretReference,omitempty"`
}

// SecretLocalReference names a Secret in the same namespace.
type SecretLocalReference struct {
	// name is the Secret's name. Required.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ImageChangeTrigger starts a build when an image changes.
type ImageChangeTrigger struct {
	// lastTriggeredImageID is the image that last started a build.
	// Deprecated in OpenShift in favour of status.imageChangeTriggers.
	// Default: empty.
	// +optional
	LastTriggeredImageID string `json:"lastTriggeredImageID,omitempty"`

	// from is the image to watch: a DockerImage reference, whose registry
	// build-controller polls, starting a build when the digest the
	// reference resolves to changes; or, where the cluster serves OpenShift
	// image streams (image.openshift.io/v1, refused at admission
	// elsewhere), an ImageStreamTag. Default:
	// the strategy's from, else the last FROM of an inline Dockerfile
	// (source.dockerfile).
	// +optional
	// +kubebuilder:validation:XValidation:rule=`has(self.kind) && self.kind in ['DockerImage', 'ImageStreamTag']`,messageExpression=`(has(self.kind) ? 'kind ' + self.kind + ' is not supported' : 'kind is required') + ': watch an image in its registry with kind DockerImage and its reference, e.g. registry.example.com/team/base:1.0, or, where the cluster serves OpenShift image streams, an ImageStreamTag (<stream>:<tag>)'`
	// +kubebuilder:validation:XValidation:rule=`has(self.name) && self.name != ""`,message="name must be an image reference, e.g. registry.example.com/team/base:1.0",fieldPath=`.name`,reason=FieldValueRequired
	From *corev1.ObjectReference `json:"from,omitempty"`

	// paused stops the trigger from starting builds. Default: false.
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// ImageStreamTagReference names an image stream tag.
type ImageStreamTagReference struct {
	// namespace is the image stream's namespace. Default: the
	// BuildConfig's.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// name is "<imagestream>:<tag>". Default: empty.
	// +optional
	Name string `json:"name,omitempty"`
}

// ImageChangeTriggerStatus records what an ImageChange trigger last saw.
type ImageChangeTriggerStatus struct {
	// lastTriggeredImageID is the image that last started a build.
	// Default: empty.
	// +optional
	LastTriggeredImageID string `json:"lastTriggeredImageID,omitempty"`

	// from is the trigger's image. Default: empty.
	// +optional
	From ImageStreamTagReference `json:"from,omitempty"`

	// lastTriggerTime is when the trigger last started a build. Default:
	// unset.
	// +optional
	// +nullable
	LastTriggerTime metav1.Time `json:"lastTriggerTime,omitempty"`
}

// BuildConfigList is a list of BuildConfigs.
//
// +kubebuilder:object:root=true
type BuildConfigList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the BuildConfigs.
	Items []BuildConfig `json:"items"`
}
