package placement

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/test/bed"
)

// TestPriorityUniqueUnderConcurrency: configs of one priority created at
// the same moment in one namespace: exactly one lands, every time. A
// deleted config's priority is free again; a config that moves to another
// priority holds the new one.
func TestPriorityUniqueUnderConcurrency(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "priority", nil)
	const rounds, racers = 20, 8
	winners := map[int32]string{}
	for round := range int32(rounds) {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			landed  []string
			refused []error
			start   = make(chan struct{})
		)
		for i := range racers {
			wg.Go(func() {
				c := &multiarchv1beta1.PodPlacementConfig{
					ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: fmt.Sprintf("p%d-%d", round, i)},
					Spec:       multiarchv1beta1.PodPlacementConfigSpec{Priority: round},
				}
				<-start
				err := k8s.Create(h.ctx, c)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					landed = append(landed, c.Name)
				} else {
					refused = append(refused, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(landed) != 1 {
			t.Errorf("priority %d: %d of %d concurrent creates landed (%v), want exactly 1", round, len(landed), racers, landed)
		}
		for _, err := range refused {
			if !strings.Contains(err.Error(), fmt.Sprintf("already has priority %d", round)) {
				t.Errorf("priority %d: refused with %v, want a message naming the holder", round, err)
			}
		}
		if len(landed) > 0 {
			winners[round] = landed[0]
		}
	}
	var stored multiarchv1beta1.PodPlacementConfigList
	if err := k8s.List(h.ctx, &stored, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	seen := map[int32]string{}
	for _, c := range stored.Items {
		if other, dup := seen[c.Spec.Priority]; dup {
			t.Errorf("stored: %s and %s both have priority %d", other, c.Name, c.Spec.Priority)
		}
		seen[c.Spec.Priority] = c.Name
	}
	t.Logf("%d rounds of %d concurrent creates: %d configs stored", rounds, racers, len(stored.Items))

	// Each winner's status says it holds its priority.
	for p, name := range winners {
		c := &multiarchv1beta1.PodPlacementConfig{}
		if err := bed.WaitFor(h.ctx, k8s, types.NamespacedName{Namespace: h.ns, Name: name}, c, func(c *multiarchv1beta1.PodPlacementConfig) bool {
			return meta.IsStatusConditionTrue(c.Status.Conditions, multiarchv1beta1.ConditionPriorityClaimed)
		}); err != nil {
			t.Fatalf("%s (priority %d): never PriorityClaimed: %v", name, p, err)
		}
	}

	// Deleting a config frees its priority once the controller has
	// collected its claim.
	gone := &multiarchv1beta1.PodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: winners[0]}}
	if err := k8s.Delete(h.ctx, gone); err != nil {
		t.Fatal(err)
	}
	claim := &coordinationv1.Lease{}
	if err := bed.WaitGone(h.ctx, k8s, types.NamespacedName{Namespace: h.ns, Name: "archway-ppc-priority-0"}, claim); err != nil {
		t.Fatalf("the deleted config's claim stays: %v", err)
	}
	again := &multiarchv1beta1.PodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "again"}}
	if err := k8s.Create(h.ctx, again); err != nil {
		t.Errorf("priority 0 after its holder was deleted: %v", err)
	}

	// Moving to a free priority holds the new one: a config created with
	// it is refused.
	moved := &multiarchv1beta1.PodPlacementConfig{}
	if err := k8s.Get(h.ctx, types.NamespacedName{Namespace: h.ns, Name: winners[1]}, moved); err != nil {
		t.Fatal(err)
	}
	moved.Spec.Priority = 200
	if err := k8s.Update(h.ctx, moved); err != nil {
		t.Fatalf("moving %s to priority 200: %v", moved.Name, err)
	}
	late := &multiarchv1beta1.PodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "late"}, Spec: multiarchv1beta1.PodPlacementConfigSpec{Priority: 200}}
	if err := k8s.Create(h.ctx, late); err == nil || !strings.Contains(err.Error(), "PodPlacementConfig "+moved.Name+" in namespace") {
		t.Errorf("a second config with priority 200: %v", err)
	}
	t.Cleanup(func() {
		_ = k8s.DeleteAllOf(context.Background(), &multiarchv1beta1.PodPlacementConfig{}, client.InNamespace(h.ns))
	})
}
