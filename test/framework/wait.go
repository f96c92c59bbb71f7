package framework

import (
	"context"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/archway-build/archway/test/bed"
)

// Poll calls cond every bed.Interval until it returns true or an error, or
// timeout (a named timeout of test/bed/timeouts.go) or ctx ends.
func Poll(ctx context.Context, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, bed.Interval, timeout, true, cond)
}

// WaitEvent waits, for bed.DefaultTimeout, until namespace ns has an
// event (events.k8s.io) with reason about the object named regarding, and
// returns the event's note.
func WaitEvent(ctx context.Context, c client.Client, ns, regarding, reason string) (string, error) {
	var note string
	err := Poll(ctx, bed.DefaultTimeout, func(ctx context.Context) (bool, error) {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if e.Regarding.Name == regarding && e.Reason == reason {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	return note, err
}
