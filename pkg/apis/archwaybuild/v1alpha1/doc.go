// Package v1alpha1 holds archway's build.archway.dev/v1alpha1 API: the
// MultiArchBuild, the per-platform record of a Build that OpenShift's own
// build controller runs with archway's image as its Custom-strategy
// builder, on clusters where OpenShift serves build.openshift.io.
//
// OpenShift's Build has no field for per-platform status and its API lets a
// builder write only the revision, stages, output, reason and message
// (builds/details), so each such Build gets one MultiArchBuild of the same
// name, owned by it. Its spec and status are archway's BuildSpec and
// BuildStatus (pkg/apis/build/v1): the build pods write their entries into
// it exactly as they write into an archway Build.
//
// +kubebuilder:object:generate=true
// +groupName=build.archway.dev
package v1alpha1
