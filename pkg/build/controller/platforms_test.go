package controller

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func TestResolve(t *testing.T) {
	all4 := []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
	tests := []struct {
		name          string
		in            ResolveInput
		wantPlatforms []string
		wantSource    PlatformSource
		wantNoNode    []string
		wantFailure   buildv1.StatusReason
		wantPhase     buildv1.BuildPhase
		wantMsg       []string
	}{
		{
			name:          "spec platforms as written",
			in:            ResolveInput{Spec: []string{"linux/arm64/v8", "linux/amd64"}, Nodes: fourArches(), ArchNodeSelector: true},
			wantPlatforms: []string{"linux/arm64/v8", "linux/amd64"}, wantSource: SourceSpec,
		},
		{
			name:          "defaults when the spec has none",
			in:            ResolveInput{Defaults: []string{"linux/s390x", "linux/amd64"}, Nodes: fourArches(), ArchNodeSelector: true},
			wantPlatforms: []string{"linux/s390x", "linux/amd64"}, wantSource: SourceDefaults,
		},
		{
			name:          "spec wins over defaults",
			in:            ResolveInput{Spec: []string{"linux/arm64"}, Defaults: []string{"linux/amd64"}, Nodes: fourArches(), ArchNodeSelector: true},
			wantPlatforms: []string{"linux/arm64"}, wantSource: SourceSpec,
		},
		{
			name: "overrides win over the spec",
			in: ResolveInput{Spec: []string{"linux/arm64"}, Defaults: []string{"linux/ppc64le"}, Overrides: []string{"linux/amd64", "linux/s390x"},
				Nodes: fourArches(), ArchNodeSelector: true},
			wantPlatforms: []string{"linux/amd64", "linux/s390x"}, wantSource: SourceOverrides,
		},
		{
			name:          "nodes: every usable architecture, sorted, control plane excluded by its taint",
			in:            ResolveInput{Nodes: fourArches(), ArchNodeSelector: true},
			wantPlatforms: all4, wantSource: SourceNodes,
		},
		{
			name: "nodes: NotReady, cordoned, windows and untolerated nodes do not count",
			in: ResolveInput{ArchNodeSelector: true, Nodes: []corev1.Node{
				node("a").obj(), node("b").arch("arm64").notReady().obj(), node("c").arch("ppc64le").cordoned().obj(),
				node("d").arch("s390x").taint("gpu", corev1.TaintEffectNoExecute).obj(), node("w").os("windows").arch("arm64").obj(),
				node("e").arch("riscv64").taint("soft", corev1.TaintEffectPreferNoSchedule).obj(),
			}},
			wantPlatforms: []string{"linux/amd64", "linux/riscv64"}, wantSource: SourceNodes,
		},
		{
			name: "nodes: a tolerated taint counts",
			in: ResolveInput{ArchNodeSelector: true,
				Tolerations: []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}},
				Nodes:       []corev1.Node{node("a").obj(), node("d").arch("s390x").taint("gpu", corev1.TaintEffectNoExecute).obj()}},
			wantPlatforms: []string{"linux/amd64", "linux/s390x"}, wantSource: SourceNodes,
		},
		{
			name: "nodes: the node selector narrows the architectures",
			in: ResolveInput{ArchNodeSelector: true, NodeSelector: map[string]string{"pool": "builds"},
				Nodes: []corev1.Node{node("a").label("pool", "builds").obj(), node("b").arch("arm64").label("pool", "builds").obj(), node("c").arch("s390x").obj()}},
			wantPlatforms: []string{"linux/amd64", "linux/arm64"}, wantSource: SourceNodes,
		},
		{
			name: "nodes: one architecture is a classic build",
			in: ResolveInput{ArchNodeSelector: true, BuildNodeSelector: map[string]string{corev1.LabelArchStable: "amd64"},
				NodeSelector: map[string]string{corev1.LabelArchStable: "amd64"}, Nodes: fourArches()},
			wantSource: SourceNodes,
		},
		{
			name:       "nodes: none at all is a classic build (its pod waits, as in OpenShift)",
			in:         ResolveInput{ArchNodeSelector: true},
			wantSource: SourceNodes,
		},
		{
			name:          "required platform without a node fails the build with no pods",
			in:            ResolveInput{Spec: []string{"linux/amd64", "linux/riscv64"}, Nodes: fourArches(), ArchNodeSelector: true},
			wantPlatforms: []string{"linux/amd64", "linux/riscv64"}, wantSource: SourceSpec,
			wantNoNode: []string{"linux/riscv64"}, wantFailure: buildv1.StatusReasonNodePlatformNotFound, wantPhase: buildv1.BuildPhaseError,
			wantMsg: []string{"linux/riscv64"},
		},
		{
			name:          "allowed-to-fail platform without a node fails alone",
			in:            ResolveInput{Spec: []string{"linux/amd64", "linux/riscv64"}, AllowedToFail: []string{"linux/riscv64"}, Nodes: fourArches(), ArchNodeSelector: true},
			wantPlatforms: []string{"linux/amd64", "linux/riscv64"}, wantSource: SourceSpec, wantNoNode: []string{"linux/riscv64"},
		},
		{
			name: "a platform whose only node is NotReady has no node; the message names the selector",
			in: ResolveInput{Spec: []string{"linux/amd64", "linux/arm64"}, ArchNodeSelector: true, NodeSelector: map[string]string{"pool": "b"},
				Nodes: []corev1.Node{node("a").label("pool", "b").obj(), node("b").arch("arm64").label("pool", "b").notReady().obj()}},
			wantPlatforms: []string{"linux/amd64", "linux/arm64"}, wantSource: SourceSpec,
			wantNoNode: []string{"linux/arm64"}, wantFailure: buildv1.StatusReasonNodePlatformNotFound, wantPhase: buildv1.BuildPhaseError,
			wantMsg: []string{"linux/arm64", "pool=b"},
		},
		{
			name: "the build's node selector contradicts a platform",
			in: ResolveInput{Spec: []string{"linux/amd64", "linux/arm64"}, ArchNodeSelector: true, Nodes: fourArches(),
				BuildNodeSelector: map[string]string{corev1.LabelArchStable: "amd64"}},
			wantPlatforms: []string{"linux/amd64", "linux/arm64"}, wantSource: SourceSpec,
			wantFailure: buildv1.StatusReasonNodeSelectorPlatformConflict, wantPhase: buildv1.BuildPhaseFailed,
			wantMsg: []string{"linux/arm64 needs kubernetes.io/arch=arm64", "kubernetes.io/arch=amd64"},
		},
		{
			name: "archNodeSelector=false checks neither conflicts nor nodes",
			in: ResolveInput{Spec: []string{"linux/riscv64", "linux/arm64"}, Nodes: fourArches(),
				BuildNodeSelector: map[string]string{corev1.LabelArchStable: "amd64"}},
			wantPlatforms: []string{"linux/riscv64", "linux/arm64"}, wantSource: SourceSpec,
		},
		{
			name:          "invalid platform",
			in:            ResolveInput{Spec: []string{"linux/aarch64"}, ArchNodeSelector: true},
			wantPlatforms: []string{"linux/aarch64"}, wantSource: SourceSpec,
			wantFailure: buildv1.StatusReasonInvalidPlatform, wantPhase: buildv1.BuildPhaseFailed, wantMsg: []string{`use "arm64"`},
		},
	}
	// Every case twice: on the nodes as listed, and on the representatives
	// of NodeGroups fed with them, which must resolve the same.
	for _, tt := range tests {
		for _, via := range []string{"node list", "node groups"} {
			t.Run(tt.name+"/"+via, func(t *testing.T) {
				in := tt.in
				if via == "node groups" {
					in.Nodes = nodeGroupsOf(in.Nodes).Nodes(in.NodeSelector)
				}
				got := Resolve(in)
				if diff := cmp.Diff(tt.wantPlatforms, got.Platforms); diff != "" {
					t.Errorf("platforms (-want +got):\n%s", diff)
				}
				if got.Source != tt.wantSource {
					t.Errorf("source = %s, want %s", got.Source, tt.wantSource)
				}
				var noNode []string
				for p := range got.NoNode {
					noNode = append(noNode, p)
				}
				if diff := cmp.Diff(tt.wantNoNode, noNode); diff != "" {
					t.Errorf("platforms without a node (-want +got):\n%s", diff)
				}
				switch {
				case tt.wantFailure == "" && got.Failure != nil:
					t.Errorf("unexpected failure %+v", got.Failure)
				case tt.wantFailure != "" && got.Failure == nil:
					t.Errorf("no failure, want %s", tt.wantFailure)
				case got.Failure != nil:
					if got.Failure.Reason != tt.wantFailure || got.Failure.Phase != tt.wantPhase {
						t.Errorf("failure %s/%s, want %s/%s", got.Failure.Phase, got.Failure.Reason, tt.wantPhase, tt.wantFailure)
					}
					for _, m := range tt.wantMsg {
						if !strings.Contains(got.Failure.Message, m) {
							t.Errorf("message %q does not say %q", got.Failure.Message, m)
						}
					}
				}
			})
		}
	}
}
