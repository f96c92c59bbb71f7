package protection

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

// TestDenialsOfAStoppedReplica: a replica writes the status's denials at
// most once a second, so the denials of its last second wait in memory; a
// replica that stops (a rollout, a drain) writes them once its manager has
// stopped. A burst of denials right after a status write, the webhook
// stopped at once: the status counts every one of them. (Without the
// write at stop, the burst's held denials are never counted.)
func TestDenialsOfAStoppedReplica(t *testing.T) {
	h := newHarness(t, "stopdenials")
	alice := as(t, "alice")
	useConfig(t, schedulingv1alpha1.ModeEnable)
	pod := func(name string) *corev1.Pod { return makePod(h.ns, name).nodeName(controlPlaneNode).obj() }

	// Every denial before this one is written with it.
	h.expectDenied(alice, pod("marker"), `spec.nodeName "`+controlPlaneNode+`"`)
	st := waitStatus(t, "the marker's denial written", func(s schedulingv1alpha1.ControlPlaneProtectionStatus) bool {
		return s.Denials != nil && s.Denials.Last != nil && s.Denials.Last.Pod == "marker" && s.Denials.Last.Namespace == h.ns
	})
	before := st.Denials.Count

	const burst = 5
	for i := range burst {
		h.expectDenied(alice, pod(fmt.Sprintf("burst-%d", i)), `spec.nodeName "`+controlPlaneNode+`"`)
	}
	stopWebhook()
	var err error
	if stopWebhook, err = startWebhook(context.Background()); err != nil {
		t.Fatalf("starting the webhook again: %v", err)
	}
	if err := webhooks.Install(); err != nil {
		t.Fatalf("registering the webhook again: %v", err)
	}

	last := fmt.Sprintf("burst-%d", burst-1)
	st = waitStatus(t, fmt.Sprintf("%d denials counted after %d", before+burst, before), func(s schedulingv1alpha1.ControlPlaneProtectionStatus) bool {
		return s.Denials != nil && s.Denials.Count >= before+burst
	})
	if st.Denials.Count != before+burst || st.Denials.Last == nil || st.Denials.Last.Pod != last {
		t.Errorf("denials %d, last %+v; want %d, the last %s", st.Denials.Count, st.Denials.Last, before+burst, last)
	}
}
