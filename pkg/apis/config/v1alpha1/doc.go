// Package v1alpha1 is the versioned configuration file of build-controller
// (apiVersion config.archway.dev/v1alpha1, kind BuildControllerConfiguration),
// read from the file named by --config.
//
// The build section holds what OpenShift keeps in openshiftcontrolplane/v1's
// BuildDefaultsConfig and BuildOverridesConfig, with the additions of the
// multi-architecture builds design: platforms (in both), archNodeSelector and
// manifestList (in the overrides), plus the builder image, per-platform
// builder image overrides and the builder service account. Other components
// of build-controller keep their sections in files of their own in this
// package (placement_types.go).
//
// Load reads, defaults and validates a file; a bad file is an error whose
// message names the field, e.g.
//
//	build.buildOverrides.platforms[1]: Invalid value: "linux/aarch64": ...
//
// +kubebuilder:object:generate=true
package v1alpha1
