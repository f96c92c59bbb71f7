package placement

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestControllerAlive(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	lease := func(holder *string, renewed time.Duration, ttl int32) *coordinationv1.Lease {
		renew := metav1.NewMicroTime(now.Add(-renewed))
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: holder, RenewTime: &renew, LeaseDurationSeconds: ptr.To(ttl)}}
	}
	tests := []struct {
		name  string
		lease *coordinationv1.Lease
		want  bool
	}{
		{name: "no lease: no controller ever ran", lease: nil},
		{name: "renewed a second ago", lease: lease(ptr.To("a"), time.Second, 20), want: true},
		{name: "renewed just within its duration", lease: lease(ptr.To("a"), 19*time.Second, 20), want: true},
		{name: "expired: the controller died or lost its lease", lease: lease(ptr.To("a"), 21*time.Second, 20)},
		{name: "released by a controller told to go", lease: lease(nil, 0, 20)},
		{name: "empty holder", lease: lease(ptr.To(""), 0, 20)},
		{name: "no renew time", lease: &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To[int32](20)}}},
		{name: "no duration", lease: &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), RenewTime: &metav1.MicroTime{Time: now}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ControllerAlive(tt.lease, now); got != tt.want {
				t.Errorf("controllerAlive = %v, want %v", got, tt.want)
			}
		})
	}
}
