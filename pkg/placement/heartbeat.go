package placement

import (
	"context"
	"math"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// HeartbeatLeaseName names the Lease the leading placement controller
// renews while it runs. The webhook gates pods only while that Lease is
// fresh: a gate nobody will remove is never added.
const HeartbeatLeaseName = "archway-pod-placement"

// controllerAlive reports whether the heartbeat lease says a placement
// controller is running at now: it has a holder, and its last renewal is
// younger than its duration. A lease the controller released on its way
// out has no holder.
func controllerAlive(lease *coordinationv1.Lease, now time.Time) bool {
	if lease == nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" ||
		lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return false
	}
	expires := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	return now.Before(expires)
}

// heartbeat renews the heartbeat lease on the leader. When the manager
// stops it, it releases the lease (so the webhook stops gating at once) and
// then calls onStop, which releases the pods still gated: a controller told
// to go leaves no pod behind.
type heartbeat struct {
	client   client.Client
	key      types.NamespacedName
	identity string
	interval time.Duration
	ttl      time.Duration
	// onStop runs after the lease is released, with a context of its own.
	onStop        func(ctx context.Context) error
	onStopTimeout time.Duration
	log           logr.Logger
	now           func() time.Time
}

var (
	_ manager.Runnable               = (*heartbeat)(nil)
	_ manager.LeaderElectionRunnable = (*heartbeat)(nil)
)

// NeedLeaderElection: only the leader places pods, so only it may say a
// controller is alive.
func (h *heartbeat) NeedLeaderElection() bool { return true }

// Start renews the lease every interval until ctx ends.
func (h *heartbeat) Start(ctx context.Context) error {
	ticker := time.NewTicker(h.interval)
	defer ticker.Stop()
	for {
		if err := h.renew(ctx, true); err != nil && ctx.Err() == nil {
			h.log.Error(err, "renewing the placement heartbeat lease", "lease", h.key)
		}
		select {
		case <-ctx.Done():
			return h.stop()
		case <-ticker.C:
		}
	}
}

// stop releases the lease, then the gated pods.
func (h *heartbeat) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), h.onStopTimeout)
	defer cancel()
	if err := h.renew(ctx, false); err != nil {
		h.log.Error(err, "releasing the placement heartbeat lease", "lease", h.key)
	}
	if h.onStop == nil {
		return nil
	}
	return h.onStop(ctx)
}

// renew writes the lease: held by this replica and renewed now, or
// released (no holder).
func (h *heartbeat) renew(ctx context.Context, hold bool) error {
	now := metav1.NewMicroTime(h.now())
	ttl := int32(min(max(h.ttl/time.Second, 1), math.MaxInt32)) // #nosec G115 -- clamped to int32 above
	spec := coordinationv1.LeaseSpec{
		LeaseDurationSeconds: ptr.To(ttl),
		RenewTime:            &now,
	}
	if hold {
		spec.HolderIdentity = ptr.To(h.identity)
	}
	lease := &coordinationv1.Lease{}
	err := h.client.Get(ctx, h.key, lease)
	switch {
	case apierrors.IsNotFound(err):
		if !hold {
			return nil
		}
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: h.key.Namespace, Name: h.key.Name}, Spec: spec}
		spec.AcquireTime = &now
		return h.client.Create(ctx, lease)
	case err != nil:
		return err
	}
	if hold && (lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != h.identity) {
		spec.AcquireTime = &now
	} else {
		spec.AcquireTime = lease.Spec.AcquireTime
	}
	if !hold && (lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != h.identity) {
		return nil // another replica holds it now
	}
	lease.Spec = spec
	return h.client.Update(ctx, lease)
}
