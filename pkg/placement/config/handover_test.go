package config

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

func TestDecideStop(t *testing.T) {
	live := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName}}
	deleting := live.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	gone := apierrors.NewNotFound(schema.GroupResource{Group: "multiarch.openshift.io", Resource: "clusterpodplacementconfigs"}, "cluster")
	tests := []struct {
		name string
		cfg  *multiarchv1beta1.ClusterPodPlacementConfig
		err  error
		want stopAction
	}{
		{name: "config live (rolling update, drain): the next leader places them", cfg: live, want: stopHandOver},
		{name: "config being deleted (uninstall): release", cfg: deleting, want: stopRelease},
		{name: "config gone: release", cfg: &multiarchv1beta1.ClusterPodPlacementConfig{}, err: gone, want: stopRelease},
		{name: "config unreadable: release, as nobody may be meant to place them", cfg: live, err: errors.New("connection refused"), want: stopRelease},
		{name: "no config read", cfg: nil, want: stopRelease},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decideStop(tt.cfg, tt.err); got != tt.want {
				t.Errorf("decideStop = %v, want %v", got, tt.want)
			}
		})
	}
}
