package webhook

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

func TestValidatePodPlacementConfig(t *testing.T) {
	cluster := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	deleting := cluster.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	mk := func(name string, priority int32) multiarchv1beta1.PodPlacementConfig {
		return multiarchv1beta1.PodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name}, Spec: multiarchv1beta1.PodPlacementConfigSpec{Priority: priority}}
	}
	c := mk("new", 10)
	tests := []struct {
		name    string
		cluster *multiarchv1beta1.ClusterPodPlacementConfig
		others  []multiarchv1beta1.PodPlacementConfig
		want    string
	}{
		{name: "no cluster config", want: "needs the ClusterPodPlacementConfig"},
		{name: "cluster config going", cluster: deleting, want: "needs the ClusterPodPlacementConfig"},
		{name: "fine", cluster: cluster, others: []multiarchv1beta1.PodPlacementConfig{mk("other", 11)}},
		{name: "itself (update)", cluster: cluster, others: []multiarchv1beta1.PodPlacementConfig{mk("new", 10)}},
		{name: "same priority", cluster: cluster, others: []multiarchv1beta1.PodPlacementConfig{mk("other", 10)}, want: "PodPlacementConfig other in namespace app already has priority 10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validatePodPlacementConfig(&c, tt.cluster, tt.others)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
	if err := validateClusterConfigDeletion(nil); err != nil {
		t.Errorf("deletion without namespace configs: %v", err)
	}
	if err := validateClusterConfigDeletion([]multiarchv1beta1.PodPlacementConfig{mk("x", 1)}); err == nil || !strings.Contains(err.Error(), "app/x") {
		t.Errorf("deletion with namespace configs: %v", err)
	}
}
