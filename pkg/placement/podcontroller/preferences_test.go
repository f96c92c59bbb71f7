package podcontroller

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

func scoringPlugins(enabled bool, pairs ...any) *multiarchv1beta1.Plugins {
	s := &multiarchv1beta1.NodeAffinityScoring{Enabled: enabled}
	for i := 0; i < len(pairs); i += 2 {
		s.Platforms = append(s.Platforms, multiarchv1beta1.NodeAffinityScoringPlatformTerm{Architecture: pairs[i].(string), Weight: int32(pairs[i+1].(int))})
	}
	return &multiarchv1beta1.Plugins{NodeAffinityScoring: s}
}

func ppc(name string, priority int32, selector map[string]string, plugins *multiarchv1beta1.Plugins) multiarchv1beta1.PodPlacementConfig {
	c := multiarchv1beta1.PodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: multiarchv1beta1.PodPlacementConfigSpec{Priority: priority, Plugins: plugins}}
	if selector != nil {
		c.Spec.LabelSelector = &metav1.LabelSelector{MatchLabels: selector}
	}
	return c
}

func TestPolicyFor(t *testing.T) {
	cluster := &multiarchv1beta1.ClusterPodPlacementConfigSpec{FallbackArchitecture: "amd64", Plugins: scoringPlugins(true, "s390x", 100, "amd64", 1)}
	merging := cluster.DeepCopy()
	merging.PreferenceMerge = multiarchv1beta1.PreferenceMergePerArchitecture
	deleting := ppc("deleting", 200, nil, scoringPlugins(true, "amd64", 99))
	deleting.DeletionTimestamp = &metav1.Time{}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}}}
	arm := ppc("arm", 10, map[string]string{"app": "web"}, scoringPlugins(true, "arm64", 100, "s390x", 1))
	low := ppc("low", 10, map[string]string{"app": "web"}, scoringPlugins(true, "arm64", 100, "s390x", 1))
	high := ppc("high", 20, nil, scoringPlugins(true, "arm64", 5, "ppc64le", 90))
	tests := []struct {
		name    string
		cluster *multiarchv1beta1.ClusterPodPlacementConfigSpec
		local   []multiarchv1beta1.PodPlacementConfig
		want    string
	}{
		{name: "cluster only", cluster: cluster, want: "[{s390x 100 C} {amd64 1 C}] [] amd64"},
		{name: "cluster only, merging", cluster: merging, want: "[{s390x 100 C} {amd64 1 C}] [] amd64"},
		{name: "nothing", want: "[] [] "},
		{
			// Seed: the cluster config's preferences are ignored for a pod a
			// namespace config applies to.
			name: "a namespace config applies: the cluster's preferences ignored", cluster: cluster,
			local: []multiarchv1beta1.PodPlacementConfig{arm},
			want:  "[{arm64 100 P-arm} {s390x 1 P-arm}] [{s390x 100 C: P-arm} {amd64 1 C: P-arm}] amd64",
		},
		{
			// Seed: the highest-priority namespace config applies.
			name: "several apply: the highest priority alone", cluster: cluster,
			local: []multiarchv1beta1.PodPlacementConfig{low, high},
			want:  "[{arm64 5 P-high} {ppc64le 90 P-high}] [{arm64 100 P-low: P-high} {s390x 1 P-low: P-high} {s390x 100 C: P-high} {amd64 1 C: P-high}] amd64",
		},
		{
			name: "merging: a namespace config wins over the cluster's for the architectures it names", cluster: merging,
			local: []multiarchv1beta1.PodPlacementConfig{arm},
			want:  "[{arm64 100 P-arm} {s390x 1 P-arm} {amd64 1 C}] [{s390x 100 C: higher}] amd64",
		},
		{
			name: "merging: higher priority first, architecture by architecture", cluster: merging,
			local: []multiarchv1beta1.PodPlacementConfig{low, high},
			want:  "[{arm64 5 P-high} {ppc64le 90 P-high} {s390x 1 P-low} {amd64 1 C}] [{arm64 100 P-low: higher} {s390x 100 C: higher}] amd64",
		},
		{
			name: "configs that do not select the pod, are disabled or are being deleted do not count", cluster: cluster,
			local: []multiarchv1beta1.PodPlacementConfig{
				ppc("other-app", 50, map[string]string{"app": "db"}, scoringPlugins(true, "arm64", 100)),
				ppc("disabled", 40, nil, scoringPlugins(false, "ppc64le", 100)),
				ppc("no-plugins", 30, nil, nil),
				deleting,
			},
			want: "[{s390x 100 C} {amd64 1 C}] [] amd64",
		},
		{
			name: "equal priorities (refused by validation) are ordered by name",
			local: []multiarchv1beta1.PodPlacementConfig{
				ppc("b", 1, nil, scoringPlugins(true, "arm64", 2)),
				ppc("a", 1, nil, scoringPlugins(true, "arm64", 1)),
			},
			want: "[{arm64 1 P-a}] [{arm64 2 P-b: P-a}] ",
		},
	}
	short := func(s string) string {
		return strings.Replace(strings.Replace(s, sourceCluster, "C", 1), sourcePodPrefix, "P-", 1)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PolicyFor(pod, tt.cluster, tt.local)
			weights := []string{}
			for _, w := range p.Weights {
				weights = append(weights, fmt.Sprintf("{%s %d %s}", w.Architecture, w.Weight, short(w.Source)))
			}
			shadowed := []string{}
			for _, e := range p.shadowed {
				why := "higher"
				if name, ok := strings.CutPrefix(e.skipped, "the higher-priority "); ok {
					why = short(strings.TrimSuffix(name, " applies to the pod"))
				}
				shadowed = append(shadowed, fmt.Sprintf("{%s %d %s: %s}", e.Architecture, e.Weight, short(e.Source), why))
			}
			if got := fmt.Sprintf("%v %v %s", weights, shadowed, p.fallback); got != tt.want {
				t.Errorf("policy %s, want %s", got, tt.want)
			}
		})
	}
}
