package controller

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// PlanInput is everything phase aggregation looks at: the Build, its
// resolved platforms and the pods that exist.
type PlanInput struct {
	// Build is the Build as last read; for decisions about terminal pods it
	// must be fresh from the apiserver (see NeedsFreshBuild).
	Build *buildv1.Build
	// Platforms are the resolved target platforms; nil for a classic build.
	Platforms []string
	// ManifestList reports whether the build ends with a manifest-list pod.
	ManifestList bool
	// Pods are the Build's pods by name.
	Pods map[string]*corev1.Pod
	// CreateErrors are the pods that could not be created, by pod name:
	// their platform (or the Build) fails with the error's reason.
	CreateErrors map[string]CreateError
	// Now is the time of the decision.
	Now metav1.Time
}

// EntryUpdate is what the controller writes into one platform's
// status.platforms entry: only these fields, with server-side apply.
type EntryUpdate struct {
	Phase   buildv1.BuildPhase
	Reason  buildv1.StatusReason
	Message string
	PodName string
	// PodUID is the UID of the platform's pod once it exists: only that
	// pod may write the entry (the status-writers policy).
	PodUID              string
	CompletionTimestamp *metav1.Time
	// EmulatedOn is the architecture of the nodes that build the platform
	// under emulation (set once, at resolution).
	EmulatedOn string
}

// Plan is what the controller does next and the Build's status that
// follows.
type Plan struct {
	// CreatePods are the platforms whose pod to create ("" is the pod of a
	// classic build).
	CreatePods []string
	// CreateManifestList asks for the manifest-list pod: with the platform
	// pods at the fan-out (it waits for them itself, so its start overlaps
	// the builds), or once every platform has ended when it is gone.
	CreateManifestList bool
	// DeletePods are the pods to delete (cancel, or a required platform
	// failed): every pod of the build that has not ended.
	DeletePods []string
	// Entries are the controller's writes into status.platforms, by
	// platform.
	Entries map[string]EntryUpdate
	// Phase, Reason and Message are the Build's.
	Phase   buildv1.BuildPhase
	Reason  buildv1.StatusReason
	Message string
	// PodUID, when set, is the UID of the pod the Build's pod-name
	// annotation names, for status.podUID: only that pod may write the
	// Build's own part of the status (the status-writers policy).
	PodUID string
	// CopyOutputFrom, when set, is the platform whose pushed image is the
	// Build's output (a single-platform build has no manifest list).
	CopyOutputFrom string
	// Events are recorded on the Build once the status write succeeded.
	Events []PlanEvent
}

// PlanEvent is an event a Plan records with its status write.
type PlanEvent struct {
	Type, Reason, Message string
}

// terminal reports whether a pod has ended.
func podTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// NeedsFreshBuild reports whether a decision about b depends on a pod that
// ended while its platform's entry (as read) has not: the builder writes its
// entry before it exits, so a cached Build may simply not show it yet. The
// reconciler reads the Build from the apiserver before deciding.
func NeedsFreshBuild(b *buildv1.Build, platforms []string, pods map[string]*corev1.Pod) bool {
	for _, p := range platforms {
		pod := pods[buildv1.PlatformPodName(b.Name, p)]
		if pod != nil && podTerminal(pod) && !entryOf(b, p).Phase.IsTerminal() {
			return true
		}
	}
	return false
}

// ExpectedPods returns the pods the Build's status says exist (a platform
// Pending or Running, a classic build Pending or Running) that are missing
// from pods. The pods come from an informer that may lag behind the Build's:
// the reconciler reads these from the apiserver before Decide calls them
// deleted.
func ExpectedPods(b *buildv1.Build, platforms []string, pods map[string]*corev1.Pod) []string {
	var out []string
	started := func(p buildv1.BuildPhase) bool {
		return p == buildv1.BuildPhasePending || p == buildv1.BuildPhaseRunning
	}
	if len(platforms) == 0 {
		if name := buildv1.ClassicPodName(b.Name); started(b.Status.Phase) && pods[name] == nil {
			out = append(out, name)
		}
		return out
	}
	for _, p := range platforms {
		if name := buildv1.PlatformPodName(b.Name, p); started(entryOf(b, p).Phase) && pods[name] == nil {
			out = append(out, name)
		}
	}
	return out
}

// fanOutUnrecorded reports whether a platform's entry is still New: the
// Build's status does not show its fan-out yet.
func fanOutUnrecorded(b *buildv1.Build, platforms []string) bool {
	for _, p := range platforms {
		if ph := entryOf(b, p).Phase; ph == "" || ph == buildv1.BuildPhaseNew {
			return true
		}
	}
	return false
}

func entryOf(b *buildv1.Build, p string) buildv1.BuildStatusPlatform {
	for _, e := range b.Status.Platforms {
		if e.Platform == p {
			return e
		}
	}
	return buildv1.BuildStatusPlatform{Platform: p}
}

// Decide aggregates the platforms' entries and the pods into the Build's
// phase, and says which pods to create or delete and what to write into the
// platforms' entries. It follows OpenShift's phases (New -> Pending ->
// Running -> Complete | Failed | Error | Cancelled) and never moves a
// build back to an earlier phase.
//
// For a multi-platform build:
//   - a platform whose entry is New (or empty) and has no pod gets its pod
//     and becomes Pending;
//   - a platform whose pod ended without the builder writing a terminal
//     entry fails from the pod: exit code, OOMKilled -> OutOfMemoryKilled,
//     evicted -> BuildPodEvicted, a succeeded pod -> PlatformVersionSkew; a
//     pod that is deleted (or gone) while its platform runs ->
//     BuildPodDeleted;
//   - cancel (status.cancelled) deletes every pod, marks every platform not
//     yet ended Cancelled and the build Cancelled (CancelledBuild);
//   - a platform not allowed to fail that fails fails the build at once
//     (PlatformBuildFailed; phase Error when the platform's is Error): the
//     other platforms' pods are deleted and those platforms Cancelled;
//   - a build with a manifest list gets its manifest-list pod with the
//     platform pods (same fan-out); the pod waits for the platforms itself.
//     Nothing is decided from it until every platform has ended, so a pod
//     the cache shows ended before the platforms do changes nothing yet;
//   - once every platform has ended and at least one succeeded, a build
//     with a manifest list completes (or fails) with its manifest-list pod,
//     created again if it is gone; one without completes at once. If none
//     succeeded the build fails.
func Decide(in PlanInput) Plan {
	b := in.Build
	if len(in.Platforms) == 0 {
		return decideClassic(in)
	}
	plan := Plan{Entries: map[string]EntryUpdate{}}
	view := map[string]buildv1.BuildStatusPlatform{}
	for _, p := range in.Platforms {
		view[p] = entryOf(b, p)
	}
	set := func(p string, u EntryUpdate) {
		plan.Entries[p] = u
		e := view[p]
		e.Phase, e.Reason, e.Message = u.Phase, u.Reason, u.Message
		if u.PodName != "" {
			e.PodName = u.PodName
		}
		if u.PodUID != "" {
			e.PodUID = u.PodUID
		}
		view[p] = e
	}
	cancelled := b.Status.Cancelled
	for _, p := range in.Platforms {
		e, name := view[p], buildv1.PlatformPodName(b.Name, p)
		pod := in.Pods[name]
		switch {
		case e.Phase.IsTerminal():
		case cancelled:
			set(p, EntryUpdate{Phase: buildv1.BuildPhaseCancelled, Reason: buildv1.StatusReasonCancelledBuild,
				Message: "The build was cancelled.", CompletionTimestamp: &in.Now})
		case in.CreateErrors[name].Message != "":
			reason, msg := in.CreateErrors[name].failure(name)
			set(p, EntryUpdate{Phase: buildv1.BuildPhaseError, Reason: reason, Message: msg, PodName: name, CompletionTimestamp: &in.Now})
		case pod == nil && (e.Phase == "" || e.Phase == buildv1.BuildPhaseNew):
			plan.CreatePods = append(plan.CreatePods, p)
		case pod == nil:
			set(p, podDeleted(name, in.Now))
		case podTerminal(pod):
			f := PodFailure(pod)
			set(p, EntryUpdate{Phase: f.Phase, Reason: f.Reason, Message: f.Message, PodName: name, CompletionTimestamp: finishedAt(pod, in.Now)})
		case pod.DeletionTimestamp != nil:
			set(p, podDeleted(name, in.Now))
		case e.Phase == "" || e.Phase == buildv1.BuildPhaseNew:
			set(p, EntryUpdate{Phase: buildv1.BuildPhasePending, PodName: name, PodUID: string(pod.UID)})
		}
		// The pod's UID, once, while the platform runs: its builder waits
		// for it before writing the entry.
		if e := view[p]; pod != nil && !e.Phase.IsTerminal() && e.PodUID != string(pod.UID) {
			u, ok := plan.Entries[p]
			if !ok {
				u = EntryUpdate{Phase: e.Phase, Reason: e.Reason, Message: e.Message}
			}
			u.PodUID = string(pod.UID)
			set(p, u)
		}
	}
	plan.PodUID = namedPodUID(in)

	var failed, running []string
	allEnded, succeeded, started := true, 0, false
	allError := true
	for _, p := range in.Platforms {
		e := view[p]
		switch {
		case e.Phase == buildv1.BuildPhaseComplete:
			succeeded++
			started = true
		case e.Phase.IsTerminal():
			started = started || e.StartTimestamp != nil
			if !allowedToFail(b.Spec.PlatformsAllowedToFail, p) && e.Phase != buildv1.BuildPhaseCancelled {
				failed = append(failed, describe(e))
				allError = allError && e.Phase == buildv1.BuildPhaseError
			}
		default:
			allEnded = false
			running = append(running, p)
			if e.Phase == buildv1.BuildPhaseRunning {
				started = true
			}
		}
	}
	// Only the platforms' pods start a build: the manifest-list pod runs
	// from the fan-out on, waiting for them.
	for _, p := range in.Platforms {
		if pod := in.Pods[buildv1.PlatformPodName(b.Name, p)]; pod != nil && pod.Status.Phase == corev1.PodRunning {
			started = true
		}
	}
	// It comes with them, or after them when the fan-out was cut short
	// once they were made (a controller that died before its status
	// write: the entries still New); once the status shows the fan-out, a
	// missing one is gone and comes again only at the end.
	if mlName := buildv1.ManifestListPodName(b.Name); in.ManifestList && in.Pods[mlName] == nil && in.CreateErrors[mlName].Message == "" &&
		(len(plan.CreatePods) > 0 || fanOutUnrecorded(b, in.Platforms)) {
		plan.CreateManifestList = true
	}

	switch {
	case cancelled:
		plan.DeletePods = livePods(in.Pods)
		plan.CreatePods, plan.CreateManifestList = nil, false
		plan.Phase, plan.Reason, plan.Message = buildv1.BuildPhaseCancelled, buildv1.StatusReasonCancelledBuild, "The build was cancelled by the user."
	case len(failed) > 0:
		// The manifest-list pod is left alone: it sees the Build end and
		// exits; the pod that removes the per-platform tags comes once
		// every platform pod has ended (cleanup).
		plan.CreatePods, plan.CreateManifestList = nil, false
		// Only the platforms still running are stopped: a platform that
		// ended keeps its pod (and its logs), even when the cache does not
		// show that pod ended yet.
		stop := map[string]*corev1.Pod{}
		for _, p := range running {
			if pod := in.Pods[buildv1.PlatformPodName(b.Name, p)]; pod != nil {
				stop[pod.Name] = pod
			}
		}
		plan.DeletePods = livePods(stop)
		for _, p := range running {
			set(p, EntryUpdate{Phase: buildv1.BuildPhaseCancelled, Reason: buildv1.StatusReasonCancelledBuild,
				Message: "Cancelled because a platform not allowed to fail failed.", CompletionTimestamp: &in.Now})
		}
		plan.Phase = buildv1.BuildPhaseFailed
		if allError {
			plan.Phase = buildv1.BuildPhaseError
		}
		what := "A platform not allowed to fail did not succeed"
		if len(failed) > 1 {
			what = "Platforms not allowed to fail did not succeed"
		}
		plan.Reason = buildv1.StatusReasonPlatformBuildFailed
		plan.Message = fmt.Sprintf("%s: %s.", what, strings.Join(failed, "; "))
	case allEnded && succeeded == 0:
		var all []string
		for _, p := range in.Platforms {
			all = append(all, describe(view[p]))
		}
		plan.Phase, plan.Reason = buildv1.BuildPhaseFailed, buildv1.StatusReasonPlatformBuildFailed
		plan.Message = fmt.Sprintf("No platform succeeded: %s.", strings.Join(all, "; "))
	case allEnded && in.ManifestList:
		decideManifestList(in, &plan)
	case allEnded:
		plan.Phase = buildv1.BuildPhaseComplete
		if len(in.Platforms) == 1 && b.Spec.Output.To != nil {
			plan.CopyOutputFrom = in.Platforms[0]
		}
	case started:
		plan.Phase = buildv1.BuildPhaseRunning
	case len(in.Pods) > 0 || len(plan.CreatePods) > 0:
		plan.Phase = buildv1.BuildPhasePending
	default:
		plan.Phase = buildv1.BuildPhaseNew
	}
	plan.Phase = forward(b.Status.Phase, plan.Phase)
	return plan
}

// decideManifestList follows the manifest-list pod once every platform has
// ended. A pod gone by then (deleted or evicted and removed while it
// waited) is created again: its job is idempotent. One that exists and
// failed, even before the platforms ended, fails the build as it says
// (ManifestListFailed, BuildPodEvicted...): its termination message is the
// reason a user reads, and a second run would wait for the same Build.
func decideManifestList(in PlanInput, plan *Plan) {
	name := buildv1.ManifestListPodName(in.Build.Name)
	pod := in.Pods[name]
	switch {
	case in.CreateErrors[name].Message != "":
		plan.Phase = buildv1.BuildPhaseError
		plan.Reason, plan.Message = in.CreateErrors[name].failure(name)
	case pod == nil:
		plan.CreateManifestList = true
		plan.Phase = buildv1.BuildPhaseRunning
	case pod.Status.Phase == corev1.PodSucceeded:
		plan.Phase = buildv1.BuildPhaseComplete
	case pod.Status.Phase == corev1.PodFailed:
		f := PodFailure(pod)
		plan.Phase, plan.Reason, plan.Message = f.Phase, f.Reason, f.Message
		if f.Reason == buildv1.StatusReasonGenericBuildFailed {
			plan.Reason = buildv1.StatusReasonManifestListFailed
		}
	case pod.DeletionTimestamp != nil:
		u := podDeleted(name, in.Now)
		plan.Phase, plan.Reason, plan.Message = u.Phase, u.Reason, u.Message
	default:
		plan.Phase = buildv1.BuildPhaseRunning
	}
}

// namedPodUID is the UID of the pod the Build's pod-name annotation names
// when it exists and status.podUID does not say it yet, else "".
func namedPodUID(in PlanInput) string {
	b := in.Build
	pod := in.Pods[b.Annotations[buildv1.BuildPodNameAnnotation]]
	if pod == nil || b.Status.PodUID == string(pod.UID) {
		return ""
	}
	return string(pod.UID)
}

// decideClassic follows the single pod of a classic build, as OpenShift
// does.
func decideClassic(in PlanInput) Plan {
	b := in.Build
	name := buildv1.ClassicPodName(b.Name)
	pod := in.Pods[name]
	var plan Plan
	switch {
	case b.Status.Cancelled:
		plan.DeletePods = livePods(in.Pods)
		plan.Phase, plan.Reason, plan.Message = buildv1.BuildPhaseCancelled, buildv1.StatusReasonCancelledBuild, "The build was cancelled by the user."
	case in.CreateErrors[name].Message != "":
		plan.Phase = buildv1.BuildPhaseError
		plan.Reason, plan.Message = in.CreateErrors[name].failure(name)
	case pod == nil && (b.Status.Phase == "" || b.Status.Phase == buildv1.BuildPhaseNew):
		plan.CreatePods = []string{""}
		plan.Phase = buildv1.BuildPhasePending
	case pod == nil:
		u := podDeleted(name, in.Now)
		plan.Phase, plan.Reason, plan.Message = u.Phase, u.Reason, u.Message
	case pod.Status.Phase == corev1.PodSucceeded:
		plan.Phase = buildv1.BuildPhaseComplete
	case pod.Status.Phase == corev1.PodFailed:
		f := PodFailure(pod)
		plan.Phase, plan.Reason, plan.Message = f.Phase, f.Reason, f.Message
	case pod.DeletionTimestamp != nil:
		u := podDeleted(name, in.Now)
		plan.Phase, plan.Reason, plan.Message = u.Phase, u.Reason, u.Message
	case pod.Status.Phase == corev1.PodRunning:
		plan.Phase = buildv1.BuildPhaseRunning
	default:
		plan.Phase = buildv1.BuildPhasePending
	}
	plan.Phase = forward(b.Status.Phase, plan.Phase)
	plan.PodUID = namedPodUID(in)
	return plan
}

// forward keeps a build from moving back to an earlier phase when what it
// decided from is older than what it wrote before (informer lag).
func forward(current, next buildv1.BuildPhase) buildv1.BuildPhase {
	rank := map[buildv1.BuildPhase]int{"": 0, buildv1.BuildPhaseNew: 1, buildv1.BuildPhasePending: 2, buildv1.BuildPhaseRunning: 3}
	if next.IsTerminal() || current.IsTerminal() {
		return next
	}
	if rank[next] < rank[current] {
		return current
	}
	return next
}

func livePods(pods map[string]*corev1.Pod) []string {
	var out []string
	for name, p := range pods {
		if !podTerminal(p) && p.DeletionTimestamp == nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func podDeleted(name string, now metav1.Time) EntryUpdate {
	return EntryUpdate{Phase: buildv1.BuildPhaseError, Reason: buildv1.StatusReasonBuildPodDeleted,
		Message: fmt.Sprintf("The build pod %s was deleted before the build ended.", name), PodName: name, CompletionTimestamp: &now}
}

// describe says how a platform ended, for messages: "linux/s390x Failed
// (DockerBuildFailed: exit status 1)".
func describe(e buildv1.BuildStatusPlatform) string {
	s := e.Platform + " " + string(e.Phase)
	var why []string
	if e.Reason != "" {
		why = append(why, string(e.Reason))
	}
	if msg, _, _ := strings.Cut(strings.TrimSpace(e.Message), "\n"); msg != "" {
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		why = append(why, strings.TrimSuffix(msg, "."))
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, ": ") + ")"
	}
	return s
}

// reasonPrefix is a termination message that starts with a reason:
// "FetchSourceFailed: git clone ...". Builders end with such a message so
// the controller can tell why they failed.
var reasonPrefix = regexp.MustCompile(`^([A-Z][A-Za-z0-9]+): (.*)`)

// PodFailure says why a build pod that ended, or was evicted, did not
// produce a result. A builder can name the reason itself with a
// termination message "<Reason>: <message>"; otherwise it comes from the
// pod: evicted -> BuildPodEvicted, OOMKilled -> OutOfMemoryKilled, a
// deadline -> GenericBuildFailed saying so, no container status ->
// NoBuildContainerStatus (Error), any other exit -> GenericBuildFailed with
// the exit code. A pod that succeeded without its builder writing a result
// is PlatformVersionSkew: an older builder that does not know platforms.
func PodFailure(pod *corev1.Pod) Failure {
	if pod.Status.Phase == corev1.PodSucceeded {
		return Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonPlatformVersionSkew,
			Message: fmt.Sprintf("The build pod %s succeeded without writing its status.platforms entry; its builder may not support multi-platform builds.", pod.Name)}
	}
	switch pod.Status.Reason {
	case "Evicted":
		return Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonBuildPodEvicted,
			Message: firstNonEmpty(pod.Status.Message, fmt.Sprintf("The build pod %s was evicted.", pod.Name))}
	case "DeadlineExceeded":
		return Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonGenericBuildFailed,
			Message: fmt.Sprintf("The build pod %s ran longer than spec.completionDeadlineSeconds allows.", pod.Name)}
	}
	var term *corev1.ContainerStateTerminated
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			term = cs.State.Terminated
			break
		}
	}
	if term == nil {
		return Failure{Phase: buildv1.BuildPhaseError, Reason: buildv1.StatusReasonNoBuildContainerStatus,
			Message: fmt.Sprintf("The build pod %s failed without a container status.", pod.Name)}
	}
	if term.Reason == "OOMKilled" {
		return Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonOutOfMemoryKilled,
			Message: fmt.Sprintf("The build pod %s was killed for running out of memory.", pod.Name)}
	}
	msg := strings.TrimSpace(term.Message)
	if m := reasonPrefix.FindStringSubmatch(msg); m != nil {
		return Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReason(m[1]), Message: m[2]}
	}
	s := fmt.Sprintf("The build pod %s exited with code %d", pod.Name, term.ExitCode)
	if line, _, _ := strings.Cut(msg, "\n"); line != "" {
		s += ": " + line
	}
	return Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonGenericBuildFailed, Message: s}
}

func finishedAt(pod *corev1.Pod, now metav1.Time) *metav1.Time {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && !t.FinishedAt.IsZero() {
			at := t.FinishedAt
			return &at
		}
	}
	return &now
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// durationSummary formats a duration as people read it: 1m32s, 3.2s.
func durationSummary(d time.Duration) string {
	if d >= time.Second {
		d = d.Round(time.Second)
	} else {
		d = d.Round(time.Millisecond)
	}
	return d.String()
}
