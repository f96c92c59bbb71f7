package placement

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// HeartbeatLeaseName names the Lease the leading placement controller
// renews while it runs. The webhook gates pods only while that Lease is
// fresh: a gate nobody will remove is never added.
const HeartbeatLeaseName = "archway-pod-placement"

// ControllerAlive reports whether the heartbeat lease says a placement
// controller is running at now: it has a holder, and its last renewal is
// younger than its duration. A lease the controller released on its way
// out has no holder.
func ControllerAlive(lease *coordinationv1.Lease, now time.Time) bool {
	if lease == nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" ||
		lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return false
	}
	expires := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	return now.Before(expires)
}
