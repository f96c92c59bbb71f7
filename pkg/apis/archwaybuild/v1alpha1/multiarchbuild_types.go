package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// MultiArchBuild is one OpenShift Build as archway's custom builder runs it:
// the Docker build it fans out into one pod per platform, and each
// platform's status. It has the Build's name and namespace and an owner
// reference to it, and is deleted with it. The custom builder pod creates it
// and writes what build-controller writes for an archway Build; each
// platform's pod writes its own entry of status.platforms.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=multiarchbuilds,singular=multiarchbuild,shortName=mab,scope=Namespaced
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.phase`,description="The phase of the platforms' build."
// +kubebuilder:printcolumn:name="Platforms",type=string,JSONPath=`.status.platformsSummary`,description="Platforms complete out of platforms targeted."
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startTimestamp`,description="When the build started."
// +kubebuilder:printcolumn:name="Duration",type=string,JSONPath=`.status.durationSummary`,description="How long the build ran."
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,priority=1,description="Why the build is in its phase."
type MultiArchBuild struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata: the OpenShift Build's name and
	// namespace, and an owner reference to it.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the Docker build the custom builder runs for the Build: its
	// source and output, the platforms it resolved. Required; immutable
	// as an archway Build's spec is.
	// +required
	Spec buildv1.BuildSpec `json:"spec"`

	// status is what happened, as an archway Build's status: the phase and
	// one entry per platform. Default: phase New.
	// +optional
	// +kubebuilder:default={}
	Status buildv1.BuildStatus `json:"status,omitempty"`
}

// MultiArchBuildList is a list of MultiArchBuilds.
//
// +kubebuilder:object:root=true
type MultiArchBuildList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the list's metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the MultiArchBuilds.
	Items []MultiArchBuild `json:"items"`
}
