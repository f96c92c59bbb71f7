package config

import (
	"context"
	"errors"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
)

// What a leader told to stop does with the pods still gated.
//
// While the ClusterPodPlacementConfig lives (a rolling update, a node
// drain, a scale-down), it hands them over: it leaves them gated and the
// heartbeat lease held, so the webhook goes on gating, and stops at once;
// the manager then frees the election lease (LeaderElectionReleaseOnCancel)
// and a standby leads at its next retry and places them (a new leader's
// cache starts with every gated pod). The stopping process waits for the
// heartbeat lease to change hands (Controller.Finish); when no replica
// takes it within HandoverTimeout (the last replica stopped, or every
// replica at once), it releases the lease and the gated pods as before,
// so no pod waits for a controller that is not coming.
//
// When the config is gone or being deleted (uninstall), or cannot be read,
// it releases them at once: nobody is meant to place them.

// stopAction is what a stopping leader does with the gated pods.
type stopAction int

const (
	// stopRelease releases the heartbeat lease and every gated pod.
	stopRelease stopAction = iota
	// stopHandOver leaves them to the next leader.
	stopHandOver
)

// decideStop is what a leader stopping does, given the
// ClusterPodPlacementConfig read from the apiserver (err from that read).
func decideStop(cfg *multiarchv1beta1.ClusterPodPlacementConfig, err error) stopAction {
	if err != nil || cfg == nil || cfg.DeletionTimestamp != nil {
		return stopRelease
	}
	return stopHandOver
}

// Controller is the config side of the placement controller that Setup
// added to a manager.
type Controller struct {
	heartbeat *heartbeat
}

// Finish completes a stop the manager began: call it once the manager's
// Start has returned (so its election lease is free). When the stopping
// leader handed the gated pods over, it waits up to HandoverTimeout for
// another replica to hold the heartbeat lease, and otherwise releases the
// lease and the gated pods. It does nothing when the process did not lead
// or released at stop.
func (c *Controller) Finish(ctx context.Context) error {
	if c == nil || c.heartbeat == nil {
		return nil
	}
	return c.heartbeat.finish(ctx)
}

// finish waits for the next leader after a hand-over.
func (h *heartbeat) finish(ctx context.Context) error {
	if !h.handedOver.Load() {
		return nil
	}
	start := h.now()
	next, err := h.waitNextLeader(ctx)
	if err == nil {
		h.log.Info("handed the gated pods over", "nextLeader", next, "after", h.now().Sub(start).Round(time.Millisecond))
		return nil
	}
	h.log.Info("no other placement controller took over: releasing the gated pods", "waited", h.now().Sub(start).Round(time.Millisecond), "reason", err.Error())
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.onStopTimeout)
	defer cancel()
	return h.release(rctx, h.reader)
}

// waitNextLeader waits until another replica holds the heartbeat lease
// and returns its identity.
func (h *heartbeat) waitNextLeader(ctx context.Context) (string, error) {
	var next string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, h.handoverTimeout, true, func(ctx context.Context) (bool, error) {
		lease := &coordinationv1.Lease{}
		if err := h.reader.Get(ctx, h.key, lease); err != nil {
			return false, nil // gone or unreachable for now: keep waiting
		}
		if holder := lease.Spec.HolderIdentity; holder != nil && *holder != "" && *holder != h.identity && placement.ControllerAlive(lease, h.now()) {
			next = *holder
			return true, nil
		}
		return false, nil
	})
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return "", errors.New("the heartbeat lease did not change hands in time")
	}
	return next, err
}
