package config

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/archway-build/archway/pkg/placement"
)

// heartbeat renews the heartbeat lease on the leader. When the manager
// stops it, it either hands the gated pods over to the next leader (see
// handover.go: the lease stays held, nothing is released) or releases the
// lease (so the webhook stops gating at once) and then calls onStop, which
// releases the pods still gated: a controller told to go leaves no pod
// behind.
type heartbeat struct {
	client client.Client
	// reader reads from the apiserver, for finish: the manager's cache has
	// stopped by then.
	reader   client.Reader
	key      types.NamespacedName
	identity string
	interval time.Duration
	ttl      time.Duration
	// onStop runs after the lease is released, with a context of its own.
	onStop        func(ctx context.Context) error
	onStopTimeout time.Duration
	// decide, when set, reads what a stop should do; nil releases.
	decide func(ctx context.Context) stopAction
	// handoverTimeout bounds finish's wait for another replica to lead.
	handoverTimeout time.Duration
	// handedOver is set when a stop left the gated pods to the next
	// leader; finish then waits for one.
	handedOver atomic.Bool
	log        logr.Logger
	now        func() time.Time
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
		if _, err := h.renew(ctx, h.client, true); err != nil && ctx.Err() == nil {
			h.log.Error(err, "renewing the placement heartbeat lease", "lease", h.key)
		}
		select {
		case <-ctx.Done():
			return h.stop()
		case <-ticker.C:
		}
	}
}

// stop hands the gated pods over to the next leader when decide says so,
// else releases the lease, then the gated pods.
func (h *heartbeat) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), h.onStopTimeout)
	defer cancel()
	if h.decide != nil && h.decide(ctx) == stopHandOver {
		h.handedOver.Store(true)
		h.log.Info("stopping without releasing the gated pods: the ClusterPodPlacementConfig is live, so the next leader places them",
			"lease", h.key, "waitForNextLeader", h.handoverTimeout)
		return nil
	}
	return h.release(ctx, h.client)
}

// release releases the lease, then the gated pods, unless another replica
// holds the lease: that one runs and places them.
func (h *heartbeat) release(ctx context.Context, reader client.Reader) error {
	other, err := h.renew(ctx, reader, false)
	if err != nil {
		h.log.Error(err, "releasing the placement heartbeat lease", "lease", h.key)
	}
	if other != "" {
		h.log.Info("another placement controller holds the heartbeat lease: leaving the gated pods to it", "holder", other)
		return nil
	}
	if h.onStop == nil {
		return nil
	}
	return h.onStop(ctx)
}

// renew writes the lease, read with reader: held by this replica and
// renewed now, or released (no holder). Releasing a lease another replica
// holds leaves it alone and returns that replica's identity.
func (h *heartbeat) renew(ctx context.Context, reader client.Reader, hold bool) (other string, err error) {
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
	err = reader.Get(ctx, h.key, lease)
	switch {
	case apierrors.IsNotFound(err):
		if !hold {
			return "", nil
		}
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: h.key.Namespace, Name: h.key.Name}, Spec: spec}
		spec.AcquireTime = &now
		return "", h.client.Create(ctx, lease)
	case err != nil:
		return "", err
	}
	if hold && (lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != h.identity) {
		spec.AcquireTime = &now
	} else {
		spec.AcquireTime = lease.Spec.AcquireTime
	}
	if !hold && (lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != h.identity) {
		if placement.ControllerAlive(lease, h.now()) {
			return *lease.Spec.HolderIdentity, nil // another replica holds it now
		}
		return "", nil
	}
	lease.Spec = spec
	return "", h.client.Update(ctx, lease)
}
