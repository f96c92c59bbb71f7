package build

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/test/bed"
)

// TestPlatformResolution resolves Builds' target platforms with the
// controller's configuration and the bed's real nodes: the configured
// defaults when a Build names none, the configured overrides over the
// Build's own, else the architectures of the Ready, schedulable nodes the
// build pods tolerate. Each case adds its nodes first and then starts its
// own controller, whose caches hold them before its first Build.
// Not in parallel: its cases add nodes, whose architectures other
// cases' Builds would resolve to.
func TestPlatformResolution(t *testing.T) {
	four := []string{amd64, arm64, ppc64le, s390x}
	loong := func(name string, mut func(*bed.Node)) []bed.Node {
		n := bed.Node{Name: name, Arch: "loong64"}
		if mut != nil {
			mut(&n)
		}
		return []bed.Node{n}
	}
	cases := []struct {
		name   string
		config func(*configv1alpha1.BuildControllerConfig)
		nodes  []bed.Node
		spec   []string
		want   []string
	}{
		{
			name:   "buildDefaults.platforms for a Build that names none",
			config: func(c *configv1alpha1.BuildControllerConfig) { c.BuildDefaults.Platforms = []string{amd64, arm64} },
			want:   []string{amd64, arm64},
		},
		{
			name:   "buildOverrides.platforms over the Build's own",
			config: func(c *configv1alpha1.BuildControllerConfig) { c.BuildOverrides.Platforms = []string{ppc64le, s390x} },
			spec:   []string{amd64},
			want:   []string{ppc64le, s390x},
		},
		{
			name:  "the nodes' architectures: a Ready loong64 node counts, the tainted control plane does not",
			nodes: loong("node-loong64-ready", nil),
			want:  append(slices.Clone(four), "linux/loong64"),
		},
		{
			name:  "a cordoned node does not count",
			nodes: loong("node-loong64-cordoned", func(n *bed.Node) { n.Unschedulable = true }),
			want:  four,
		},
		{
			name:  "a NotReady node does not count",
			nodes: loong("node-loong64-notready", func(n *bed.Node) { n.NotReady = true }),
			want:  four,
		},
		{
			name: "a node tainted NoSchedule that build pods do not tolerate does not count",
			nodes: loong("node-loong64-tainted", func(n *bed.Node) {
				n.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
			}),
			want: four,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "resolve")
			if len(tc.nodes) > 0 {
				if err := testBed.AddNodes(h.ctx, tc.nodes...); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					for _, n := range tc.nodes {
						node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
						_ = k8s.Delete(context.Background(), node)
						_ = bed.WaitGone(context.Background(), k8s, client.ObjectKeyFromObject(node), &corev1.Node{})
					}
				})
			}
			h.cfg = testConfig(tc.config)
			h.ctrl = startController(t, h.ns, h.cfg)
			h.create(h.buildObj("app", tc.spec...))
			b := h.waitBuild("platforms resolved", func(b *buildv1.Build) bool { return len(b.Status.Platforms) > 0 })
			var got []string
			for _, e := range b.Status.Platforms {
				got = append(got, e.Platform)
				if e.Reason == buildv1.StatusReasonNodePlatformNotFound {
					t.Errorf("platform %s resolved without a node: %s", e.Platform, e.Message)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("resolved %v, want %v", got, want)
			}
		})
	}
}
