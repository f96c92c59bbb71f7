package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

const (
	amd   = "linux/amd64"
	arm   = "linux/arm64"
	ppc   = "linux/ppc64le"
	s390x = "linux/s390x"
)

var (
	four                     = []string{amd, arm, ppc, s390x}
	podAmd, podArm           = "app-build-linux-amd64", "app-build-linux-arm64"
	podPpc, podS390x, podML  = "app-build-linux-ppc64le", "app-build-linux-s390x", "app-manifest-list"
	newP, pendingP, runningP = buildv1.BuildPhaseNew, buildv1.BuildPhasePending, buildv1.BuildPhaseRunning
	completeP, failedP       = buildv1.BuildPhaseComplete, buildv1.BuildPhaseFailed
	errorP, cancelledP       = buildv1.BuildPhaseError, buildv1.BuildPhaseCancelled
)

// entries4 gives the four platforms the same phase.
func entries4(w *buildWrapper, phase buildv1.BuildPhase) *buildWrapper {
	for _, p := range four {
		w.entry(p, phase, "")
	}
	return w
}

func TestDecide(t *testing.T) {
	type want struct {
		phase        buildv1.BuildPhase
		reason       buildv1.StatusReason
		msg          string // substring
		create       []string
		createML     bool
		del          []string
		entries      map[string]buildv1.BuildPhase
		entryReasons map[string]buildv1.StatusReason
		copyFrom     string
	}
	tests := []struct {
		name   string
		in     PlanInput
		noML   bool
		want   want
		single bool
	}{
		{
			name: "resolved build gets its four pods and goes Pending",
			in:   PlanInput{Build: entries4(makeBuild("app").phase(newP), newP).obj()},
			want: want{phase: pendingP, create: four},
		},
		{
			name: "pods exist: entries New become Pending, no pod twice",
			in: PlanInput{Build: entries4(makeBuild("app").phase(newP), newP).obj(),
				Pods: podsOf(makePod(podAmd).obj(), makePod(podArm).obj())},
			want: want{phase: pendingP, create: []string{ppc, s390x}, entries: map[string]buildv1.BuildPhase{amd: pendingP, arm: pendingP}},
		},
		{
			name: "a running pod makes the build Running",
			in: PlanInput{Build: entries4(makeBuild("app").phase(pendingP), pendingP).obj(),
				Pods: podsOf(makePod(podAmd).running().obj(), makePod(podArm).obj(), makePod(podPpc).obj(), makePod(podS390x).obj())},
			want: want{phase: runningP},
		},
		{
			name: "a builder's Running entry makes the build Running",
			in: PlanInput{Build: makeBuild("app").phase(pendingP).entry(amd, runningP, "").entry(arm, pendingP, "").entry(ppc, pendingP, "").entry(s390x, pendingP, "").obj(),
				Pods: podsOf(makePod(podAmd).obj(), makePod(podArm).obj(), makePod(podPpc).obj(), makePod(podS390x).obj())},
			want: want{phase: runningP},
		},
		{
			name: "never back: stale pods do not move a Running build to Pending",
			in: PlanInput{Build: entries4(makeBuild("app").phase(runningP), pendingP).obj(),
				Pods: podsOf(makePod(podAmd).obj(), makePod(podArm).obj(), makePod(podPpc).obj(), makePod(podS390x).obj())},
			want: want{phase: runningP},
		},
		{
			name: "every platform complete: the manifest-list pod is created",
			in: PlanInput{Build: entries4(makeBuild("app").phase(runningP), completeP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podAmd).exited(0, "", "").obj(), makePod(podArm).exited(0, "", "").obj())},
			want: want{phase: runningP, createML: true},
		},
		{
			name: "fan-out: the manifest-list pod is created with the platform pods",
			in:   PlanInput{Build: entries4(makeBuild("app").phase(newP), newP).obj(), ManifestList: true},
			want: want{phase: pendingP, create: four, createML: true},
		},
		{
			name: "fan-out resumed (some platform pods exist, not the manifest-list pod): created with the rest",
			in: PlanInput{Build: entries4(makeBuild("app").phase(newP), newP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podAmd).obj(), makePod(podArm).obj())},
			want: want{phase: pendingP, create: []string{ppc, s390x}, createML: true, entries: map[string]buildv1.BuildPhase{amd: pendingP, arm: pendingP}},
		},
		{
			name: "fan-out cut short after every platform's pod (entries still New): the manifest-list pod is created",
			in: PlanInput{Build: entries4(makeBuild("app").phase(newP), newP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podAmd).obj(), makePod(podArm).obj(), makePod(podPpc).obj(), makePod(podS390x).obj())},
			want: want{phase: pendingP, createML: true, entries: map[string]buildv1.BuildPhase{amd: pendingP, arm: pendingP, ppc: pendingP, s390x: pendingP}},
		},
		{
			name: "fan-out: the manifest-list pod that exists is not created twice",
			in: PlanInput{Build: entries4(makeBuild("app").phase(newP), newP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).obj())},
			want: want{phase: pendingP, create: four},
		},
		{
			name: "fan-out: the manifest-list pod could not be created: the platforms go on, decided at the end",
			in: PlanInput{Build: entries4(makeBuild("app").phase(newP), newP).obj(), ManifestList: true,
				CreateErrors: map[string]CreateError{podML: {Message: "forbidden"}},
				Pods:         podsOf(makePod(podAmd).obj(), makePod(podArm).obj(), makePod(podPpc).obj(), makePod(podS390x).obj())},
			want: want{phase: pendingP, entries: map[string]buildv1.BuildPhase{amd: pendingP, arm: pendingP, ppc: pendingP, s390x: pendingP}},
		},
		{
			name: "single-platform build: no manifest-list pod at the fan-out",
			in:   PlanInput{Build: makeBuild("app").phase(newP).entry(arm, newP, "").obj(), Platforms: []string{arm}},
			want: want{phase: pendingP, create: []string{arm}}, single: true,
		},
		{
			name: "the waiting manifest-list pod running does not make the build Running",
			in: PlanInput{Build: entries4(makeBuild("app").phase(pendingP), pendingP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).running().obj(), makePod(podAmd).obj(), makePod(podArm).obj(), makePod(podPpc).obj(), makePod(podS390x).obj())},
			want: want{phase: pendingP},
		},
		{
			name: "platforms running, manifest-list pod waiting: Running, nothing created",
			in: PlanInput{Build: entries4(makeBuild("app").phase(runningP), runningP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).running().obj(), makePod(podAmd).running().obj(), makePod(podArm).running().obj(),
					makePod(podPpc).running().obj(), makePod(podS390x).running().obj())},
			want: want{phase: runningP},
		},
		{
			name: "cache lag: the manifest-list pod succeeded while platforms still run in our view: nothing decided from it",
			in: PlanInput{Build: makeBuild("app").phase(runningP).entry(amd, completeP, "").entry(arm, runningP, "").
				entry(ppc, completeP, "").entry(s390x, completeP, "").obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).exited(0, "", "").obj(), makePod(podArm).running().obj())},
			want: want{phase: runningP},
		},
		{
			name: "cache lag: the manifest-list pod failed while platforms still run in our view: nothing decided from it",
			in: PlanInput{Build: makeBuild("app").phase(runningP).entry(amd, completeP, "").entry(arm, runningP, "").
				entry(ppc, completeP, "").entry(s390x, completeP, "").obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).exited(1, "Error", "ManifestListFailed: platforms still not finished").obj(), makePod(podArm).running().obj())},
			want: want{phase: runningP},
		},
		{
			name: "the manifest-list pod deleted while platforms run: not created again yet, nothing decided",
			in: PlanInput{Build: entries4(makeBuild("app").phase(runningP), runningP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).running().deleting().obj(), makePod(podAmd).running().obj(), makePod(podArm).running().obj(),
					makePod(podPpc).running().obj(), makePod(podS390x).running().obj())},
			want: want{phase: runningP},
		},
		{
			name: "the manifest-list pod gone while platforms run: not created again before they end",
			in: PlanInput{Build: entries4(makeBuild("app").phase(runningP), runningP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podAmd).running().obj(), makePod(podArm).running().obj(),
					makePod(podPpc).running().obj(), makePod(podS390x).running().obj())},
			want: want{phase: runningP},
		},
		{
			name: "the manifest-list pod gone when every platform has ended: created again (its job is idempotent)",
			in: PlanInput{Build: entries4(makeBuild("app").phase(runningP), completeP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podAmd).exited(0, "", "").obj(), makePod(podArm).exited(0, "", "").obj(),
					makePod(podPpc).exited(0, "", "").obj(), makePod(podS390x).exited(0, "", "").obj())},
			want: want{phase: runningP, createML: true},
		},
		{
			name: "the manifest-list pod evicted before the platforms ended: at the end the build fails from it",
			in: PlanInput{Build: entries4(makeBuild("app").phase(runningP), completeP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).evicted().obj())},
			want: want{phase: failedP, reason: buildv1.StatusReasonBuildPodEvicted},
		},
		{
			name: "the manifest-list pod failed before the platforms ended: at the end ManifestListFailed",
			in: PlanInput{Build: entries4(makeBuild("app").phase(runningP), completeP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).exited(1, "Error", "").obj())},
			want: want{phase: failedP, reason: buildv1.StatusReasonManifestListFailed, msg: "code 1"},
		},
		{
			name: "required platform failed: the waiting manifest-list pod is left to see the Build end",
			in: PlanInput{Build: makeBuild("app").phase(runningP).entry(amd, completeP, "").entry(arm, runningP, "").
				entry(ppc, runningP, "").entry(s390x, failedP, buildv1.StatusReasonDockerBuildFailed).obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).running().obj(), makePod(podAmd).exited(0, "", "").obj(), makePod(podArm).running().obj(),
					makePod(podPpc).running().obj(), makePod(podS390x).exited(1, "Error", "").obj())},
			want: want{phase: failedP, reason: buildv1.StatusReasonPlatformBuildFailed, msg: "linux/s390x Failed (DockerBuildFailed)",
				del: []string{podArm, podPpc}, entries: map[string]buildv1.BuildPhase{arm: cancelledP, ppc: cancelledP}},
		},
		{
			name: "required platform failed at the fan-out (its pod refused): no manifest-list pod asked for",
			in: PlanInput{Build: entries4(makeBuild("app").phase(newP), newP).obj(), ManifestList: true,
				CreateErrors: map[string]CreateError{podS390x: {Message: "forbidden"}},
				Pods:         podsOf(makePod(podAmd).obj(), makePod(podArm).obj(), makePod(podPpc).obj())},
			want: want{phase: errorP, reason: buildv1.StatusReasonPlatformBuildFailed, msg: "CannotCreateBuildPod",
				del:     []string{podAmd, podArm, podPpc},
				entries: map[string]buildv1.BuildPhase{amd: cancelledP, arm: cancelledP, ppc: cancelledP, s390x: errorP}},
		},
		{
			name: "cancel: the waiting manifest-list pod is deleted with the platform pods",
			in: PlanInput{Build: entries4(makeBuild("app").cancelled().phase(runningP), runningP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).running().obj(), makePod(podAmd).running().obj(), makePod(podArm).running().obj(),
					makePod(podPpc).running().obj(), makePod(podS390x).running().obj())},
			want: want{phase: cancelledP, reason: buildv1.StatusReasonCancelledBuild, del: []string{podML, podAmd, podArm, podPpc, podS390x},
				entries: map[string]buildv1.BuildPhase{amd: cancelledP, arm: cancelledP, ppc: cancelledP, s390x: cancelledP}},
		},
		{
			name: "cancel before any pod of a build with a manifest list: no pod is created",
			in:   PlanInput{Build: entries4(makeBuild("app").cancelled().phase(newP), newP).obj(), ManifestList: true},
			want: want{phase: cancelledP, reason: buildv1.StatusReasonCancelledBuild,
				entries: map[string]buildv1.BuildPhase{amd: cancelledP, arm: cancelledP, ppc: cancelledP, s390x: cancelledP}},
		},
		{
			name: "manifest-list pod succeeded: Complete",
			in: PlanInput{Build: entries4(makeBuild("app").phase(runningP), completeP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).exited(0, "", "").obj())},
			want: want{phase: completeP},
		},
		{
			name: "manifest-list pod failed with a reason of its own",
			in: PlanInput{Build: entries4(makeBuild("app").phase(runningP), completeP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).exited(1, "Error", "PlatformVersionSkew: linux/s390x image is linux/amd64").obj())},
			want: want{phase: failedP, reason: buildv1.StatusReasonPlatformVersionSkew, msg: "linux/s390x image is linux/amd64"},
		},
		{
			name: "manifest-list pod failed without one: ManifestListFailed",
			in: PlanInput{Build: entries4(makeBuild("app").phase(runningP), completeP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).exited(2, "Error", "").obj())},
			want: want{phase: failedP, reason: buildv1.StatusReasonManifestListFailed, msg: "code 2"},
		},
		{
			name: "manifest-list pod deleted while running",
			in: PlanInput{Build: entries4(makeBuild("app").phase(runningP), completeP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podML).running().deleting().obj())},
			want: want{phase: errorP, reason: buildv1.StatusReasonBuildPodDeleted},
		},
		{
			name: "no manifest list (manifestList=false or no output): Complete when the platforms are",
			in:   PlanInput{Build: entries4(makeBuild("app").phase(runningP), completeP).obj()},
			want: want{phase: completeP},
		},
		{
			name: "one platform: Complete, and its image is the build's output",
			in:   PlanInput{Build: makeBuild("app").phase(runningP).entry(arm, completeP, "").obj(), Platforms: []string{arm}},
			want: want{phase: completeP, copyFrom: arm}, single: true,
		},
		{
			name: "allowed-to-fail platform failed: the others go on",
			in: PlanInput{Build: makeBuild("app").allowFail(s390x).phase(runningP).entry(amd, runningP, "").entry(arm, runningP, "").
				entry(ppc, runningP, "").entry(s390x, failedP, buildv1.StatusReasonDockerBuildFailed).obj(), ManifestList: true,
				Pods: podsOf(makePod(podAmd).running().obj(), makePod(podArm).running().obj(), makePod(podPpc).running().obj())},
			want: want{phase: runningP},
		},
		{
			name: "allowed-to-fail platform failed, the rest complete: manifest list of the rest",
			in: PlanInput{Build: makeBuild("app").allowFail(s390x).phase(runningP).entry(amd, completeP, "").entry(arm, completeP, "").
				entry(ppc, completeP, "").entry(s390x, failedP, buildv1.StatusReasonDockerBuildFailed).obj(), ManifestList: true},
			want: want{phase: runningP, createML: true},
		},
		{
			name: "every platform failed though all were allowed to: Failed",
			in: PlanInput{Build: makeBuild("app").allowFail(four...).phase(runningP).entry(amd, failedP, "").entry(arm, failedP, "").
				entry(ppc, errorP, buildv1.StatusReasonNodePlatformNotFound).entry(s390x, failedP, "").obj(), ManifestList: true},
			want: want{phase: failedP, reason: buildv1.StatusReasonPlatformBuildFailed, msg: "No platform succeeded"},
		},
		{
			name: "required platform failed: Failed at once, the others cancelled and their pods deleted",
			in: PlanInput{Build: makeBuild("app").phase(runningP).entry(amd, completeP, "").entry(arm, runningP, "").
				entry(ppc, runningP, "").entry(s390x, failedP, buildv1.StatusReasonDockerBuildFailed).obj(), ManifestList: true,
				Pods: podsOf(makePod(podAmd).exited(0, "", "").obj(), makePod(podArm).running().obj(), makePod(podPpc).running().obj(),
					makePod(podS390x).exited(1, "Error", "").obj())},
			want: want{phase: failedP, reason: buildv1.StatusReasonPlatformBuildFailed, msg: "linux/s390x Failed (DockerBuildFailed)",
				del: []string{podArm, podPpc}, entries: map[string]buildv1.BuildPhase{arm: cancelledP, ppc: cancelledP}},
		},
		{
			name: "required platform failed while the cache still shows its pod running: that pod is kept for its logs",
			in: PlanInput{Build: makeBuild("app").phase(runningP).entry(amd, completeP, "").entry(arm, runningP, "").
				entry(ppc, runningP, "").entry(s390x, failedP, buildv1.StatusReasonDockerBuildFailed).obj(), ManifestList: true,
				Pods: podsOf(makePod(podAmd).exited(0, "", "").obj(), makePod(podArm).running().obj(), makePod(podPpc).running().obj(),
					makePod(podS390x).running().obj())},
			want: want{phase: failedP, reason: buildv1.StatusReasonPlatformBuildFailed, msg: "linux/s390x Failed (DockerBuildFailed)",
				del: []string{podArm, podPpc}, entries: map[string]buildv1.BuildPhase{arm: cancelledP, ppc: cancelledP}},
		},
		{
			name: "a pod that failed without writing its entry fails its platform from the exit code",
			in: PlanInput{Build: entries4(makeBuild("app").allowFail(arm).phase(runningP), runningP).obj(), ManifestList: true,
				Pods: podsOf(makePod(podAmd).running().obj(), makePod(podArm).exited(137, "Error", "killed").obj(),
					makePod(podPpc).running().obj(), makePod(podS390x).running().obj())},
			want: want{phase: runningP, entries: map[string]buildv1.BuildPhase{arm: failedP},
				entryReasons: map[string]buildv1.StatusReason{arm: buildv1.StatusReasonGenericBuildFailed}},
		},
		{
			name: "OOMKilled and evicted pods",
			in: PlanInput{Build: entries4(makeBuild("app").allowFail(arm, ppc).phase(runningP), runningP).obj(),
				Pods: podsOf(makePod(podAmd).running().obj(), makePod(podArm).exited(137, "OOMKilled", "").obj(),
					makePod(podPpc).evicted().obj(), makePod(podS390x).running().obj())},
			want: want{phase: runningP, entries: map[string]buildv1.BuildPhase{arm: failedP, ppc: failedP},
				entryReasons: map[string]buildv1.StatusReason{arm: buildv1.StatusReasonOutOfMemoryKilled, ppc: buildv1.StatusReasonBuildPodEvicted}},
		},
		{
			name: "a pod that succeeded without writing its entry: version skew",
			in: PlanInput{Build: entries4(makeBuild("app").allowFail(arm).phase(runningP), runningP).obj(),
				Pods: podsOf(makePod(podAmd).running().obj(), makePod(podArm).exited(0, "", "").obj(),
					makePod(podPpc).running().obj(), makePod(podS390x).running().obj())},
			want: want{phase: runningP, entries: map[string]buildv1.BuildPhase{arm: failedP},
				entryReasons: map[string]buildv1.StatusReason{arm: buildv1.StatusReasonPlatformVersionSkew}},
		},
		{
			name: "a pod deleted by someone: BuildPodDeleted, and a required platform fails the build",
			in: PlanInput{Build: entries4(makeBuild("app").phase(runningP), runningP).obj(),
				Pods: podsOf(makePod(podAmd).running().obj(), makePod(podArm).running().deleting().obj(),
					makePod(podPpc).running().obj(), makePod(podS390x).running().obj())},
			want: want{phase: errorP, reason: buildv1.StatusReasonPlatformBuildFailed, msg: "BuildPodDeleted",
				del:          []string{podAmd, podPpc, podS390x},
				entries:      map[string]buildv1.BuildPhase{arm: errorP, amd: cancelledP, ppc: cancelledP, s390x: cancelledP},
				entryReasons: map[string]buildv1.StatusReason{arm: buildv1.StatusReasonBuildPodDeleted}},
		},
		{
			name: "a pod gone while its platform was Pending: BuildPodDeleted, not a second pod",
			in: PlanInput{Build: makeBuild("app").allowFail(arm).phase(pendingP).entry(amd, pendingP, "").entry(arm, pendingP, "").obj(),
				Platforms: []string{amd, arm}, Pods: podsOf(makePod(podAmd).obj())},
			want: want{phase: pendingP, entries: map[string]buildv1.BuildPhase{arm: errorP},
				entryReasons: map[string]buildv1.StatusReason{arm: buildv1.StatusReasonBuildPodDeleted}},
		},
		{
			name: "cancel: every live pod deleted, unfinished platforms Cancelled",
			in: PlanInput{Build: makeBuild("app").cancelled().phase(runningP).entry(amd, completeP, "").entry(arm, runningP, "").
				entry(ppc, runningP, "").entry(s390x, pendingP, "").obj(),
				Pods: podsOf(makePod(podAmd).exited(0, "", "").obj(), makePod(podArm).running().obj(), makePod(podPpc).running().obj(), makePod(podS390x).obj())},
			want: want{phase: cancelledP, reason: buildv1.StatusReasonCancelledBuild, del: []string{podArm, podPpc, podS390x},
				entries: map[string]buildv1.BuildPhase{arm: cancelledP, ppc: cancelledP, s390x: cancelledP}},
		},
		{
			name: "cancel before any pod: no pod is created",
			in:   PlanInput{Build: entries4(makeBuild("app").cancelled().phase(newP), newP).obj()},
			want: want{phase: cancelledP, reason: buildv1.StatusReasonCancelledBuild,
				entries: map[string]buildv1.BuildPhase{amd: cancelledP, arm: cancelledP, ppc: cancelledP, s390x: cancelledP}},
		},
		{
			name: "a pod that could not be created: CannotCreateBuildPod",
			in: PlanInput{Build: entries4(makeBuild("app").allowFail(s390x).phase(newP), newP).obj(),
				CreateErrors: map[string]CreateError{podS390x: {Message: "forbidden"}},
				Pods:         podsOf(makePod(podAmd).obj(), makePod(podArm).obj(), makePod(podPpc).obj())},
			want: want{phase: pendingP, entries: map[string]buildv1.BuildPhase{amd: pendingP, arm: pendingP, ppc: pendingP, s390x: errorP},
				entryReasons: map[string]buildv1.StatusReason{s390x: buildv1.StatusReasonCannotCreateBuildPod}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			if in.Platforms == nil {
				in.Platforms = four
			}
			in.Now = metav1.Now()
			got := Decide(in)
			if got.Phase != tt.want.phase || got.Reason != tt.want.reason {
				t.Errorf("build %s/%s (%s), want %s/%s", got.Phase, got.Reason, got.Message, tt.want.phase, tt.want.reason)
			}
			if !strings.Contains(got.Message, tt.want.msg) {
				t.Errorf("message %q does not say %q", got.Message, tt.want.msg)
			}
			sorted := cmpopts.SortSlices(func(a, b string) bool { return a < b })
			if diff := cmp.Diff(tt.want.create, got.CreatePods, sorted, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("pods to create (-want +got):\n%s", diff)
			}
			if got.CreateManifestList != tt.want.createML {
				t.Errorf("create manifest list = %v", got.CreateManifestList)
			}
			if diff := cmp.Diff(tt.want.del, got.DeletePods, sorted, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("pods to delete (-want +got):\n%s", diff)
			}
			phases, reasons := map[string]buildv1.BuildPhase{}, map[string]buildv1.StatusReason{}
			for p, u := range got.Entries {
				if tt.want.entries[p] != "" || u.Phase != buildv1.BuildPhasePending || tt.want.entries != nil {
					phases[p] = u.Phase
				}
				if u.Reason != "" && tt.want.entryReasons[p] != "" {
					reasons[p] = u.Reason
				}
			}
			if diff := cmp.Diff(tt.want.entries, phases, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("entry phases (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want.entryReasons, reasons, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("entry reasons (-want +got):\n%s", diff)
			}
			if got.CopyOutputFrom != tt.want.copyFrom {
				t.Errorf("copy output from %q", got.CopyOutputFrom)
			}
		})
	}
}

func TestDecideClassic(t *testing.T) {
	tests := []struct {
		name   string
		build  *buildv1.Build
		pods   map[string]*corev1.Pod
		phase  buildv1.BuildPhase
		reason buildv1.StatusReason
		create bool
		del    bool
	}{
		{"new build gets its pod", makeBuild("app").phase(newP).obj(), nil, pendingP, "", true, false},
		{"pod pending", makeBuild("app").phase(pendingP).obj(), podsOf(makePod("app-build").obj()), pendingP, "", false, false},
		{"pod running", makeBuild("app").phase(pendingP).obj(), podsOf(makePod("app-build").running().obj()), runningP, "", false, false},
		{"pod succeeded", makeBuild("app").phase(runningP).obj(), podsOf(makePod("app-build").exited(0, "", "").obj()), completeP, "", false, false},
		{"pod failed with the builder's reason", makeBuild("app").phase(runningP).obj(),
			podsOf(makePod("app-build").exited(1, "Error", "FetchSourceFailed: git clone failed").obj()), failedP, buildv1.StatusReasonFetchSourceFailed, false, false},
		{"pod gone", makeBuild("app").phase(runningP).obj(), nil, errorP, buildv1.StatusReasonBuildPodDeleted, false, false},
		{"cancelled", makeBuild("app").cancelled().phase(runningP).obj(), podsOf(makePod("app-build").running().obj()), cancelledP, buildv1.StatusReasonCancelledBuild, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(PlanInput{Build: tt.build, Pods: tt.pods, Now: metav1.Now()})
			if got.Phase != tt.phase || got.Reason != tt.reason {
				t.Errorf("got %s/%s (%s), want %s/%s", got.Phase, got.Reason, got.Message, tt.phase, tt.reason)
			}
			if (len(got.CreatePods) > 0) != tt.create || (len(got.DeletePods) > 0) != tt.del {
				t.Errorf("create %v delete %v", got.CreatePods, got.DeletePods)
			}
		})
	}
}

func TestNeedsFreshBuild(t *testing.T) {
	b := makeBuild("app").entry(amd, runningP, "").entry(arm, completeP, "").obj()
	if NeedsFreshBuild(b, []string{amd, arm}, podsOf(makePod(podAmd).running().obj(), makePod(podArm).exited(0, "", "").obj())) {
		t.Error("fresh read asked for although no ended pod has an unfinished entry")
	}
	if !NeedsFreshBuild(b, []string{amd, arm}, podsOf(makePod(podAmd).exited(0, "", "").obj())) {
		t.Error("no fresh read for a pod that ended while its entry says Running")
	}
}

func TestExpectedPods(t *testing.T) {
	b := makeBuild("app").entry(amd, pendingP, "").entry(arm, newP, "").entry(ppc, runningP, "").entry(s390x, failedP, "").obj()
	got := ExpectedPods(b, four, podsOf(makePod(podPpc).obj()))
	if diff := cmp.Diff([]string{podAmd}, got); diff != "" {
		t.Errorf("expected pods (-want +got):\n%s", diff)
	}
	classic := makeBuild("app").phase(runningP).obj()
	if got := ExpectedPods(classic, nil, nil); !cmp.Equal(got, []string{"app-build"}) {
		t.Errorf("classic: %v", got)
	}
}
