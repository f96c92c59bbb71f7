package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/archway-build/archway/pkg/placement"
)

// leaderElectionTimings are the election lease's timings, named as
// kube-controller-manager names them; the defaults are controller-runtime's
// (and kube-controller-manager's).
type leaderElectionTimings struct {
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
}

func addLeaderElectionFlags(f *pflag.FlagSet, t *leaderElectionTimings) {
	f.DurationVar(&t.leaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"how long a standby waits after the leader's last renewal before it takes the lease: how long a crashed leader's work waits")
	f.DurationVar(&t.renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"how long the leader keeps trying to renew before it gives up leading; shorter than --leader-elect-lease-duration")
	f.DurationVar(&t.retryPeriod, "leader-elect-retry-period", 2*time.Second,
		"how often a standby tries to take the lease (jittered up to 2.2 times this) and the leader renews it; a lease freed by a leader told to stop is taken within about this long")
}

// validate says which flag to change when the timings cannot work: the
// leader must renew before its lease expires, with retries to spare.
func (t leaderElectionTimings) validate() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--leader-elect-lease-duration", t.leaseDuration},
		{"--leader-elect-renew-deadline", t.renewDeadline},
		{"--leader-elect-retry-period", t.retryPeriod},
	} {
		if d.v <= 0 {
			return fmt.Errorf("%s=%v: must be more than zero", d.flag, d.v)
		}
	}
	if t.leaseDuration <= t.renewDeadline {
		return fmt.Errorf("--leader-elect-lease-duration=%v must be longer than --leader-elect-renew-deadline=%v: "+
			"a leader must give up before its lease expires, or two replicas may lead at once", t.leaseDuration, t.renewDeadline)
	}
	if minimum := time.Duration(leaderelection.JitterFactor * float64(t.retryPeriod)); t.renewDeadline <= minimum {
		return fmt.Errorf("--leader-elect-renew-deadline=%v must be longer than %v (%v times --leader-elect-retry-period=%v): "+
			"the leader needs room for a retry before it gives up", t.renewDeadline, minimum, leaderelection.JitterFactor, t.retryPeriod)
	}
	return nil
}

// untilTaken bounds how long a free lease waits for a standby: its retries
// are jittered up to (1 + JitterFactor) retry periods apart.
func (t leaderElectionTimings) untilTaken() time.Duration {
	return time.Duration((1 + leaderelection.JitterFactor) * float64(t.retryPeriod))
}

// handoverTimeout is how long a placement leader told to stop waits for a
// standby to lead before it releases the gated pods itself: a standby's
// next retry and its start, with a margin.
func (t leaderElectionTimings) handoverTimeout() time.Duration {
	return max(placement.DefaultOptions().HandoverTimeout, t.untilTaken()+5*time.Second)
}

// heartbeatTTL is how long the placement webhook goes on gating after the
// leader's last heartbeat: longer than a takeover after a crash (the lease
// expires, then a standby's next retry), so a crash stops no gating.
func (t leaderElectionTimings) heartbeatTTL() time.Duration {
	return max(placement.DefaultOptions().HeartbeatTTL, t.leaseDuration+t.untilTaken())
}
