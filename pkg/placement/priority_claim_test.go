package placement

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

func TestJudgeClaim(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	claim := func(uid types.UID, renewedAgo time.Duration) *coordinationv1.Lease {
		c := &multiarchv1beta1.PodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: uid}, Spec: multiarchv1beta1.PodPlacementConfigSpec{Priority: 5}}
		return newClaim(c, now.Add(-renewedAgo))
	}
	config := func(uid types.UID, priority int32) *multiarchv1beta1.PodPlacementConfig {
		return &multiarchv1beta1.PodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: uid}, Spec: multiarchv1beta1.PodPlacementConfigSpec{Priority: priority}}
	}
	deleting := config("u1", 5)
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	tests := []struct {
		name    string
		claim   *coordinationv1.Lease
		self    types.UID
		holder  *multiarchv1beta1.PodPlacementConfig
		deleted bool
		want    claimVerdict
	}{
		{name: "our own claim", claim: claim("u2", time.Hour), self: "u2", want: claimOurs},
		{name: "held by a stored config of that priority", claim: claim("u1", time.Hour), self: "u2", holder: config("u1", 5), want: ClaimHeld},
		{name: "holder not stored yet, claim fresh: its create may be in flight", claim: claim("u1", time.Second), self: "u2", want: ClaimHeld},
		{name: "holder moved priority, claim fresh: its update may be undone", claim: claim("u1", time.Second), self: "u2", holder: config("u1", 6), want: ClaimHeld},
		{name: "holder never stored, grace over", claim: claim("u1", 2*time.Minute), self: "u2", want: ClaimStale},
		{name: "holder moved priority, grace over", claim: claim("u1", 2*time.Minute), self: "u2", holder: config("u1", 6), want: ClaimStale},
		{name: "holder being deleted, grace over", claim: claim("u1", 2*time.Minute), self: "u2", holder: deleting, want: ClaimStale},
		{name: "holder's deletion observed: stale at once", claim: claim("u1", time.Second), self: "u2", deleted: true, want: ClaimStale},
		{name: "the name belongs to another config now: stale at once", claim: claim("u1", time.Second), self: "u2", holder: config("u3", 5), want: ClaimStale},
		{name: "the controller judging (no self) a held claim", claim: claim("u1", time.Hour), holder: config("u1", 5), want: ClaimHeld},
		{name: "a claim with no holder UID is never ours", claim: claim("", time.Hour), self: "", holder: config("u1", 5), want: ClaimStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := JudgeClaim(tt.claim, tt.self, 5, tt.holder, tt.deleted, now, time.Minute); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClaimPriority(t *testing.T) {
	for name, want := range map[string]int32{"archway-ppc-priority-0": 0, "archway-ppc-priority-255": 255} {
		if got, ok := ClaimPriority(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}); !ok || got != want {
			t.Errorf("%s: %d %v", name, got, ok)
		}
	}
	for _, name := range []string{"archway-ppc-priority-256", "archway-ppc-priority-05", "archway-ppc-priority-x", "other-5"} {
		if _, ok := ClaimPriority(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}); ok {
			t.Errorf("%s: read as a claim", name)
		}
	}
}
