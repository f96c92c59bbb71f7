package placement

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// TestConfigValidation: the apiserver itself rejects malformed configs
// with messages that say what is wrong (CEL and schema on the CRD; no
// validating webhook).
func TestConfigValidation(t *testing.T) {
	scoring := func(terms ...multiarchv1beta1.NodeAffinityScoringPlatformTerm) *multiarchv1beta1.Plugins {
		return &multiarchv1beta1.Plugins{NodeAffinityScoring: &multiarchv1beta1.NodeAffinityScoring{Enabled: true, Platforms: terms}}
	}
	tests := []struct {
		name string
		cfg  multiarchv1beta1.ClusterPodPlacementConfig
		want string
	}{
		{
			name: "not named cluster",
			cfg:  multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
			want: "ClusterPodPlacementConfig is a singleton: metadata.name must be 'cluster'",
		},
		{
			name: "unknown fallback architecture",
			cfg:  multiarchv1beta1.ClusterPodPlacementConfig{Spec: multiarchv1beta1.ClusterPodPlacementConfigSpec{FallbackArchitecture: "riscv64"}},
			want: `spec.fallbackArchitecture: Unsupported value: "riscv64"`,
		},
		{
			name: "unknown log verbosity",
			cfg:  multiarchv1beta1.ClusterPodPlacementConfig{Spec: multiarchv1beta1.ClusterPodPlacementConfigSpec{LogVerbosity: "Loud"}},
			want: `spec.logVerbosity: Unsupported value: "Loud"`,
		},
		{
			name: "duplicate architecture",
			cfg: multiarchv1beta1.ClusterPodPlacementConfig{Spec: multiarchv1beta1.ClusterPodPlacementConfigSpec{Plugins: scoring(
				multiarchv1beta1.NodeAffinityScoringPlatformTerm{Architecture: "arm64", Weight: 10},
				multiarchv1beta1.NodeAffinityScoringPlatformTerm{Architecture: "arm64", Weight: 20},
			)}},
			want: "spec.plugins.nodeAffinityScoring.platforms[1]: Duplicate value",
		},
		{
			name: "weight out of range",
			cfg: multiarchv1beta1.ClusterPodPlacementConfig{Spec: multiarchv1beta1.ClusterPodPlacementConfigSpec{Plugins: scoring(
				multiarchv1beta1.NodeAffinityScoringPlatformTerm{Architecture: "arm64", Weight: 101},
			)}},
			want: "spec.plugins.nodeAffinityScoring.platforms[0].weight: Invalid value: 101: spec.plugins.nodeAffinityScoring.platforms[0].weight in body should be less than or equal to 100",
		},
		{
			name: "unknown architecture",
			cfg: multiarchv1beta1.ClusterPodPlacementConfig{Spec: multiarchv1beta1.ClusterPodPlacementConfigSpec{Plugins: scoring(
				multiarchv1beta1.NodeAffinityScoringPlatformTerm{Architecture: "x86_64", Weight: 1},
			)}},
			want: `spec.plugins.nodeAffinityScoring.platforms[0].architecture: Unsupported value: "x86_64"`,
		},
		{
			name: "no platforms",
			cfg:  multiarchv1beta1.ClusterPodPlacementConfig{Spec: multiarchv1beta1.ClusterPodPlacementConfigSpec{Plugins: scoring()}},
			want: "spec.plugins.nodeAffinityScoring.platforms",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg.DeepCopy()
			if cfg.Name == "" {
				// Validated without touching the suite's config.
				cfg.Name = multiarchv1beta1.ClusterPodPlacementConfigName
			}
			err := k8s.Create(context.Background(), cfg, &dryRunAll{})
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\ndoes not contain %q", err, tt.want)
			}
		})
	}
	// The exec-format-error monitor is cluster-wide: a PodPlacementConfig
	// cannot set it.
	ppc := &multiarchv1beta1.PodPlacementConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "monitor"},
		Spec: multiarchv1beta1.PodPlacementConfigSpec{Plugins: &multiarchv1beta1.Plugins{
			ExecFormatErrorMonitor: &multiarchv1beta1.ExecFormatErrorMonitor{Enabled: true},
		}},
	}
	err := k8s.Create(context.Background(), ppc, &dryRunAll{})
	if want := "execFormatErrorMonitor is cluster-wide: set it in the ClusterPodPlacementConfig"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a PodPlacementConfig with execFormatErrorMonitor: %v, want %q", err, want)
	}
}
