package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
)

func TestResolveEmulation(t *testing.T) {
	armOnAMD := configv1alpha1.EmulatedPlatform{Platform: "linux/arm/v7", HostArchitectures: []string{"amd64"}}
	armPreferARM64 := configv1alpha1.EmulatedPlatform{Platform: "linux/arm/v7", HostArchitectures: []string{"arm64", "amd64"}}
	riscvOnRequest := configv1alpha1.EmulatedPlatform{Platform: "linux/riscv64", HostArchitectures: []string{"amd64"}, OnRequest: true}
	emulating := func(nodes ...corev1.Node) []corev1.Node { return append(fourArches(), nodes...) }
	amdEmulatesArm := node("amd-emu").label(EmulationLabel("arm"), "true").obj()
	arm64EmulatesArm := node("arm64-emu").arch("arm64").label(EmulationLabel("arm"), "true").obj()
	amdEmulatesRiscv := node("amd-emu-rv").label(EmulationLabel("riscv64"), "true").obj()
	tests := []struct {
		name         string
		in           ResolveInput
		wantEmulated map[string]string
		wantNoNode   []string
		wantFailure  buildv1.StatusReason
		wantMsg      []string // every substring in the failure's message, or the NoNode message when there is no failure
	}{
		{
			name:        "not configured: NodePlatformNotFound as before",
			in:          ResolveInput{Spec: []string{"linux/amd64", "linux/arm/v7"}, Nodes: emulating(amdEmulatesArm)},
			wantNoNode:  []string{"linux/arm/v7"},
			wantFailure: buildv1.StatusReasonNodePlatformNotFound, wantMsg: []string{"platform linux/arm/v7"},
		},
		{
			name:         "configured: emulated on the host architecture's labelled node",
			in:           ResolveInput{Spec: []string{"linux/amd64", "linux/arm/v7"}, Nodes: emulating(amdEmulatesArm), Emulation: []configv1alpha1.EmulatedPlatform{armOnAMD}},
			wantEmulated: map[string]string{"linux/arm/v7": "amd64"},
		},
		{
			name:         "the platform as the config spells it differently (linux/arm = linux/arm/v7)",
			in:           ResolveInput{Spec: []string{"linux/arm"}, Nodes: emulating(amdEmulatesArm), Emulation: []configv1alpha1.EmulatedPlatform{armOnAMD}},
			wantEmulated: map[string]string{"linux/arm": "amd64"},
		},
		{
			name:         "the first host architecture with a labelled node wins",
			in:           ResolveInput{Spec: []string{"linux/arm/v7"}, Nodes: emulating(amdEmulatesArm, arm64EmulatesArm), Emulation: []configv1alpha1.EmulatedPlatform{armPreferARM64}},
			wantEmulated: map[string]string{"linux/arm/v7": "arm64"},
		},
		{
			name:         "a preferred host architecture without a labelled node is passed over",
			in:           ResolveInput{Spec: []string{"linux/arm/v7"}, Nodes: emulating(amdEmulatesArm), Emulation: []configv1alpha1.EmulatedPlatform{armPreferARM64}},
			wantEmulated: map[string]string{"linux/arm/v7": "amd64"},
		},
		{
			name:        "configured, but no node has the handler's label: NodePlatformNotFound naming the label",
			in:          ResolveInput{Spec: []string{"linux/arm/v7"}, Nodes: fourArches(), Emulation: []configv1alpha1.EmulatedPlatform{armOnAMD}},
			wantNoNode:  []string{"linux/arm/v7"},
			wantFailure: buildv1.StatusReasonNodePlatformNotFound, wantMsg: []string{"under emulation on amd64", "emulation.archway.dev/arm=true"},
		},
		{
			name: "the label on a node of an architecture that is not a host does not count",
			in: ResolveInput{Spec: []string{"linux/arm/v7"}, Nodes: emulating(node("s").arch("s390x").label(EmulationLabel("arm"), "true").obj()),
				Emulation: []configv1alpha1.EmulatedPlatform{armOnAMD}},
			wantNoNode: []string{"linux/arm/v7"}, wantFailure: buildv1.StatusReasonNodePlatformNotFound,
		},
		{
			name: "a labelled node the build's pods cannot use (cordoned, tainted, outside the selector) does not count",
			in: ResolveInput{Spec: []string{"linux/arm/v7"}, NodeSelector: map[string]string{"pool": "builds"},
				Nodes: []corev1.Node{
					node("a").label("pool", "builds").obj(),
					node("b").label("pool", "builds").label(EmulationLabel("arm"), "true").cordoned().obj(),
					node("c").label("pool", "builds").label(EmulationLabel("arm"), "true").taint("gpu", corev1.TaintEffectNoSchedule).obj(),
					node("d").label(EmulationLabel("arm"), "true").obj(),
				},
				Emulation: []configv1alpha1.EmulatedPlatform{armOnAMD}},
			wantNoNode: []string{"linux/arm/v7"}, wantFailure: buildv1.StatusReasonNodePlatformNotFound, wantMsg: []string{"with node selector {pool=builds}"},
		},
		{
			name: "a label value other than true does not count",
			in: ResolveInput{Spec: []string{"linux/arm/v7"}, Nodes: emulating(node("x").label(EmulationLabel("arm"), "false").obj()),
				Emulation: []configv1alpha1.EmulatedPlatform{armOnAMD}},
			wantNoNode: []string{"linux/arm/v7"}, wantFailure: buildv1.StatusReasonNodePlatformNotFound,
		},
		{
			name:       "a native node wins over emulation",
			in:         ResolveInput{Spec: []string{"linux/arm64"}, Nodes: emulating(amdEmulatesArm), Emulation: []configv1alpha1.EmulatedPlatform{{Platform: "linux/arm64", HostArchitectures: []string{"amd64"}}}},
			wantNoNode: nil,
		},
		{
			name: "the annotation Never refuses it",
			in: ResolveInput{Spec: []string{"linux/arm/v7"}, Nodes: emulating(amdEmulatesArm), Emulation: []configv1alpha1.EmulatedPlatform{armOnAMD},
				EmulationRequest: "Never"},
			wantNoNode: []string{"linux/arm/v7"}, wantFailure: buildv1.StatusReasonNodePlatformNotFound, wantMsg: []string{`annotation ("Never") does not name it`},
		},
		{
			name:       "onRequest: not emulated without the annotation",
			in:         ResolveInput{Spec: []string{"linux/riscv64"}, Nodes: emulating(amdEmulatesRiscv), Emulation: []configv1alpha1.EmulatedPlatform{riscvOnRequest}},
			wantNoNode: []string{"linux/riscv64"}, wantFailure: buildv1.StatusReasonNodePlatformNotFound,
			wantMsg: []string{"only for Builds that name it in the build.openshift.io/emulation annotation"},
		},
		{
			name: "onRequest: emulated when the annotation names it; a platform it leaves out is not",
			in: ResolveInput{Spec: []string{"linux/riscv64", "linux/arm/v7"}, Nodes: emulating(amdEmulatesRiscv, amdEmulatesArm),
				Emulation: []configv1alpha1.EmulatedPlatform{armOnAMD, riscvOnRequest}, EmulationRequest: " linux/riscv64 ", AllowedToFail: []string{"linux/arm/v7"}},
			wantEmulated: map[string]string{"linux/riscv64": "amd64"},
			wantNoNode:   []string{"linux/arm/v7"}, wantMsg: []string{"does not name it"},
		},
		{
			name: "the annotation cannot allow what the configuration does not",
			in: ResolveInput{Spec: []string{"linux/riscv64"}, Nodes: emulating(amdEmulatesRiscv), Emulation: []configv1alpha1.EmulatedPlatform{armOnAMD},
				EmulationRequest: "linux/riscv64"},
			wantNoNode: []string{"linux/riscv64"}, wantFailure: buildv1.StatusReasonNodePlatformNotFound,
			wantMsg: []string{"build.emulation does not allow for this platform"},
		},
		{
			name: "an annotation that does not parse fails the build, saying what to write",
			in: ResolveInput{Spec: []string{"linux/arm/v7"}, Nodes: emulating(amdEmulatesArm), Emulation: []configv1alpha1.EmulatedPlatform{armOnAMD},
				EmulationRequest: "linux/armhf"},
			wantFailure: buildv1.StatusReasonInvalidPlatform, wantMsg: []string{"annotation build.openshift.io/emulation", "linux/armhf", "Never or a comma-separated list"},
		},
		{
			name: "allowed to fail and not emulable: that platform's entry fails, the build goes on",
			in: ResolveInput{Spec: []string{"linux/amd64", "linux/arm/v7"}, Nodes: fourArches(), Emulation: []configv1alpha1.EmulatedPlatform{armOnAMD},
				AllowedToFail: []string{"linux/arm/v7"}},
			wantNoNode: []string{"linux/arm/v7"}, wantMsg: []string{"nor under emulation on amd64"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.ArchNodeSelector = true
			res := Resolve(tt.in)
			if diff := cmp.Diff(tt.wantEmulated, res.Emulated); diff != "" {
				t.Errorf("emulated (-want +got):\n%s", diff)
			}
			var noNode []string
			for p := range res.NoNode {
				noNode = append(noNode, p)
			}
			if diff := cmp.Diff(tt.wantNoNode, noNode); diff != "" {
				t.Errorf("no node (-want +got):\n%s", diff)
			}
			var gotReason buildv1.StatusReason
			msg := strings.Join(mapValues(res.NoNode), "\n")
			if res.Failure != nil {
				gotReason, msg = res.Failure.Reason, res.Failure.Message
			}
			if gotReason != tt.wantFailure {
				t.Errorf("failure %q (%s), want %q", gotReason, msg, tt.wantFailure)
			}
			for _, want := range tt.wantMsg {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not say %q", msg, want)
				}
			}
		})
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestEmulatedPod: the pod of a platform built under emulation is pinned
// to the host architecture and to the node label of the emulated
// architecture's handler; a native platform's pod is not.
func TestEmulatedPod(t *testing.T) {
	cfg := testConfig()
	b := makeBuild("app").platforms("linux/amd64", "linux/arm/v7").obj()
	b.Status.Platforms = []buildv1.BuildStatusPlatform{{Platform: "linux/amd64", Phase: buildv1.BuildPhaseNew},
		{Platform: "linux/arm/v7", Phase: buildv1.BuildPhaseNew, EmulatedOn: "amd64"}}
	pl := PodPlan{Config: cfg, Platforms: []string{"linux/amd64", "linux/arm/v7"}}
	pod, err := pl.BuildPod(b, "linux/arm/v7")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64", "emulation.archway.dev/arm": "true"}
	if diff := cmp.Diff(want, pod.Spec.NodeSelector); diff != "" {
		t.Errorf("emulated pod's node selector (-want +got):\n%s", diff)
	}
	pod, err = pl.BuildPod(b, "linux/amd64")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"}, pod.Spec.NodeSelector); diff != "" {
		t.Errorf("native pod's node selector (-want +got):\n%s", diff)
	}
}

// TestResolutionPlanEmulated: the first status write records where each
// emulated platform is built, and the controller's apply carries it.
func TestResolutionPlanEmulated(t *testing.T) {
	b := makeBuild("app").platforms("linux/amd64", "linux/arm/v7").obj()
	now := metav1.Now()
	res := Resolution{Platforms: []string{"linux/amd64", "linux/arm/v7"}, Source: SourceSpec, Emulated: map[string]string{"linux/arm/v7": "amd64"}}
	plan := ResolutionPlan(b, res, now)
	next := NextStatus(b, res.Platforms, plan, now)
	got := map[string]string{}
	for _, e := range next.Platforms {
		got[e.Platform] = e.EmulatedOn
	}
	if diff := cmp.Diff(map[string]string{"linux/amd64": "", "linux/arm/v7": "amd64"}, got); diff != "" {
		t.Errorf("emulatedOn by platform (-want +got):\n%s", diff)
	}
	ac, err := StatusApply(b, next, plan)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ac.Status.Platforms {
		if *e.Platform == "linux/arm/v7" && (e.EmulatedOn == nil || *e.EmulatedOn != "amd64") {
			t.Errorf("the apply of linux/arm/v7 does not carry emulatedOn: %+v", e)
		}
	}
}
