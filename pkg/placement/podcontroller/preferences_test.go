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
	deleting := ppc("deleting", 200, nil, scoringPlugins(true, "amd64", 99))
	deleting.DeletionTimestamp = &metav1.Time{}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "tier": "front"}}}
	tests := []struct {
		name    string
		cluster *multiarchv1beta1.ClusterPodPlacementConfigSpec
		local   []multiarchv1beta1.PodPlacementConfig
		want    string
	}{
		{name: "cluster only", cluster: cluster, want: "[{s390x 100 C} {amd64 1 C}] [] amd64"},
		{name: "nothing", want: "[] [] "},
		{
			name: "a namespace config wins over the cluster's for the architectures it names", cluster: cluster,
			local: []multiarchv1beta1.PodPlacementConfig{ppc("arm", 10, map[string]string{"app": "web"}, scoringPlugins(true, "arm64", 100, "s390x", 1))},
			want:  "[{arm64 100 P-arm} {s390x 1 P-arm} {amd64 1 C}] [{s390x 100 C}] amd64",
		},
		{
			name: "higher priority first, architecture by architecture", cluster: cluster,
			local: []multiarchv1beta1.PodPlacementConfig{
				ppc("low", 10, map[string]string{"app": "web"}, scoringPlugins(true, "arm64", 100, "s390x", 1)),
				ppc("high", 20, nil, scoringPlugins(true, "arm64", 5, "ppc64le", 90)),
			},
			want: "[{arm64 5 P-high} {ppc64le 90 P-high} {s390x 1 P-low} {amd64 1 C}] [{arm64 100 P-low} {s390x 100 C}] amd64",
		},
		{
			name: "configs that do not select the pod, are disabled or are being deleted do not count", cluster: cluster,
			local: []multiarchv1beta1.PodPlacementConfig{
				ppc("other-app", 50, map[string]string{"app": "db"}, scoringPlugins(true, "arm64", 100)),
				ppc("disabled", 40, nil, scoringPlugins(false, "ppc64le", 100)),
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
			want: "[{arm64 1 P-a}] [{arm64 2 P-b}] ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := PolicyFor(pod, tt.cluster, tt.local)
			show := func(ps []preference) []string {
				out := []string{}
				for _, w := range ps {
					src := strings.Replace(strings.Replace(w.Source, sourceCluster, "C", 1), sourcePodPrefix, "P-", 1)
					out = append(out, fmt.Sprintf("{%s %d %s}", w.Architecture, w.Weight, src))
				}
				return out
			}
			if got := fmt.Sprintf("%v %v %s", show(p.Weights), show(p.shadowed), p.fallback); got != tt.want {
				t.Errorf("policy %s, want %s", got, tt.want)
			}
		})
	}
}
