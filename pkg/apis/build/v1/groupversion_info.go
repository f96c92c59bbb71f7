package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group, OpenShift's.
const GroupName = "build.openshift.io"

// GroupVersion is the group and version of every kind in this package.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

var (
	// SchemeBuilder registers this package's kinds with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds Build, BuildList, BuildConfig and BuildConfigList to
	// a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource returns a GroupResource of this group for an unqualified resource
// name such as "builds".
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&Build{}, &BuildList{},
		&BuildConfig{}, &BuildConfigList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}

// SchemeGroupVersion is GroupVersion under the name client-go's generators
// (and the generated apply configurations) use.
var SchemeGroupVersion = GroupVersion
