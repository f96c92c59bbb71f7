// Package custom is archway's custom-builder mode: archway's builder image
// run by OpenShift's own build controller as the builder of a
// Custom-strategy Build, on clusters where OpenShift serves
// build.openshift.io (its Build capability on).
//
// OpenShift's controller makes one pod (<build>-build) from the image named
// in strategy.customStrategy.from, with the whole Build as JSON in BUILD,
// the strategy's env, the push and pull secrets it resolved mounted where
// archway's builder reads them, and the Build's service account; it takes
// the Build's result from the pod's exit code, `oc logs build/x` shows the
// pod's log, and `oc cancel-build` deletes the pod. That pod runs Run:
//
//   - LoadConfig reads build-controller's configuration from archway's
//     namespace (the ConfigMap the Role ConfigRole names), which the pods
//     are made with; without it the pod refuses to start;
//   - DockerBuild turns OpenShift's Build into the archway Build it runs:
//     the Docker strategy, its settings and the platforms taken from the
//     strategy's env (PLATFORMS, PLATFORMS_ALLOWED_TO_FAIL,
//     DOCKERFILE_PATH, BUILD_ARG_<NAME>) or the platforms annotation, and
//     refuses, naming the field, what it would otherwise drop (Refuse, and
//     ParseBuild for a spec field it does not know);
//   - the platforms are resolved, the pods made and the Build's phase
//     decided by build-controller's own functions (pkg/build/controller:
//     Resolve, PodPlan, Decide, NextStatus, DecideCleanup), so the pods are
//     those build-controller makes for an archway Build: unprivileged, pinned
//     by kubernetes.io/arch, the manifest-list pod, allowed-to-fail, the
//     per-platform tags removed when the build does not complete;
//   - the status is kept in a MultiArchBuild (build.archway.dev) of the
//     Build's name, owned by the Build: the custom pod writes what
//     build-controller writes, each platform's pod its own entry (its
//     report client is pointed there by report.BuildAPIEnv);
//   - every pod's log is copied to the custom pod's own output, each line
//     prefixed with its platform;
//   - the pod exits 0 when the Build completed, 1 otherwise; on SIGTERM (the
//     pod deleted: `oc cancel-build`) it cancels the platforms, waits for
//     their pods to end and starts the pod that removes the per-platform
//     tags.
package custom
