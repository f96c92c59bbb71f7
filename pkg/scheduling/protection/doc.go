// Package protection keeps pods off protected nodes (control-plane nodes)
// unless both whoever puts them there and the pod's namespace are
// authorized, as the ControlPlaneProtection singleton
// (scheduling.archway.dev/v1alpha1) configures.
//
// A validating webhook sees pods being created and updated and bindings
// being posted (pods/binding, what schedulers do). Decide, a pure function,
// finds every path by which a request puts a pod on a protected node
// (paths.go), checks the requester and the pod's namespace against the
// group's authorizedUsers (authorize.go), and returns per group: no path,
// authorized, denied (mode Enable) or warned (mode Inform). The webhook
// reads the config and the nodes' labels from its informer cache only, so
// a config change (the emergency override) takes effect as soon as the
// watch delivers it.
package protection
