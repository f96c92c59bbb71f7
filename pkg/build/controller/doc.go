// Package controller is archway's Build controller: it fans a Build out into
// one pod per target platform plus, when the build has an output, one pod
// that pushes the manifest list, and keeps the Build's status in step with
// them.
//
// Every decision is a pure function in a file named for it, with a table
// test beside it:
//
//   - platforms.go resolves a Build's target platforms (spec, configured
//     defaults, the cluster's nodes, configured overrides) and fails fast
//     when a platform has no node or contradicts the build's node selector.
//   - pods.go makes the pod specs: names, labels, node selectors, the Build
//     handed to each pod, defaults and overrides.
//   - phase.go aggregates the platforms' entries and the pods into the
//     Build's phase, and decides what the controller writes into each
//     platform's entry.
//   - apply.go turns that decision into one server-side apply of the
//     Build's status that never drops or overwrites what the builders wrote.
//
// The reconciler (controller.go) only reads state, calls these functions,
// creates the missing pods and writes the result: one status write per
// reconcile, events only after it succeeded.
//
// # What a build pod gets
//
// Each platform's pod (<build>-<os>-<arch>[-<variant>]-build) runs
// `builder docker-build` with the Build in BUILD: spec.platforms holds only
// its platform and spec.output.to its own tag. With more than one platform
// that tag is the output tag plus the platform's suffix, in the output's
// repository (platform.Tag: registry/team/app:v1 ->
// registry/team/app:v1-linux-arm64), because a manifest list may only list
// images of its own repository; with a single platform it is the output
// itself, and the controller copies the platform's digest into
// status.output.to when it completes. The manifest-list pod
// (<build>-manifest-list) runs `builder manifest-list` with every resolved
// platform in spec.platforms. A classic pod (<build>-build) gets the Build
// unchanged. Secrets are mounted where OpenShift mounts them
// (PushSecretMountPath, PullSecretMountPath, SourceSecretMountPath) and named
// by PUSH_DOCKERCFG_PATH, PULL_DOCKERCFG_PATH and SOURCE_SECRET_PATH; POD_NAME
// and POD_NAMESPACE name the pod.
//
// # Who writes what in the status
//
// The controller owns the Build-level phase, reason, message, timestamps,
// duration, summaries and conditions. In status.platforms it writes, with
// server-side apply under FieldManager, the entries at resolution (New, with
// podName), Pending once the pod exists, and the endings no builder can
// write: failures read from the pod (exit code, OOMKilled, eviction,
// deletion), Cancelled, and CannotCreateBuildPod. Builders apply their own
// entry under their own field manager with force (they take phase over from
// the controller's New or Pending); the controller's applies carry the
// resourceVersion they were computed from, so they fail rather than
// overwrite an entry the controller has not seen. A builder that fails can
// name its reason in its termination message, "<Reason>: <message>" (e.g.
// "FetchSourceFailed: git clone: ..."); the manifest-list pod's reason
// becomes the Build's.
package controller
