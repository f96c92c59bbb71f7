// Package build is archway's Build controller: it fans a Build out into one
// pod per target platform plus, when the build has an output, one pod that
// pushes the manifest list, and keeps the Build's status in step with them.
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
package build
