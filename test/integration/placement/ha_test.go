package placement

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
)

// leaderElectionLease is build-controller's leader election Lease
// (cmd/build-controller's leaderElectionID).
const leaderElectionLease = "build-controller.archway.dev"

// TestLeaderKilledStandbyTakesOver runs two replicas of build-controller
// (--controllers=pod-placement,placement-webhook, leader election on, the
// default lease timings) as processes, kills the leader with SIGKILL while
// 500 gated pods wait, and checks that the standby takes the lease and
// places every one of them. It logs the takeover: from the kill to the
// lease changing hands, to the first pod the new leader released and to
// the last (run with -v to see it).
//
// The leader's writes are throttled (--kube-api-qps 10) so that the backlog
// is still in flight when it is killed: it is seen releasing pods, then
// killed with most of them gated. The standby runs unthrottled.
func TestLeaderKilledStandbyTakesOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds build-controller")
	}
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "ha", nil)
	bin := buildPlacementBinary(h.ctx, t, t.TempDir())
	suiteController.stop()
	t.Cleanup(func() {
		var err error
		if suiteController, err = startController(suiteOptions()); err != nil {
			t.Errorf("restarting the suite controller: %v", err)
		}
	})
	dir := t.TempDir()
	elect := []string{"--leader-elect=true", "--leader-election-namespace=" + h.ns}
	key := types.NamespacedName{Namespace: h.ns, Name: leaderElectionLease}

	leader := startPlacementProcess(h.ctx, t, bin, dir, "leader", append(elect, "--kube-api-qps=10")...)
	first := waitLeaseHolder(h.ctx, t, key, func(holder string) bool { return holder != "" }).holder
	standby := startPlacementProcess(h.ctx, t, bin, dir, "standby", elect...)
	if got := readLease(h.ctx, t, key).holder; got != first {
		t.Fatalf("the lease went from %q to %q before the leader was killed; standby log:\n%s", first, got, standby.log(20))
	}

	const backlog = 500
	names := make([]string, backlog)
	for i := range names {
		names[i] = fmt.Sprintf("ha-%03d", i)
	}
	rw := watchReleases(t, h.ns)
	if err := createPods(h.ctx, backlog, 20, func(i int) *corev1.Pod {
		return makePod(h.ns, names[i]).image(imgAll).nodeSelector(unschedulableKey, "true").withGate().obj()
	}); err != nil {
		t.Fatal(err)
	}
	// The leader at work on the backlog.
	if err := wait.PollUntilContextTimeout(h.ctx, bed.Interval, bed.LongTimeout, true, func(context.Context) (bool, error) {
		return rw.count() > 0, nil
	}); err != nil {
		t.Fatalf("the leader released no pod: %v; log:\n%s", err, leader.log(40))
	}
	gatedAtKill, _, err := countGated(h.ctx, h.ns)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	leader.kill(t)

	taken := waitLeaseHolder(h.ctx, t, key, func(holder string) bool { return holder != "" && holder != first })
	rw.wait(t, names, bed.CaseTimeout)

	// Releases before the new leader acquired the lease are the killed
	// leader's last writes, applied by the apiserver after the kill.
	times := rw.times(names)
	byNew, firstNew, lastNew := releasedFrom(times, taken.acquired)
	late := 0
	for _, at := range times {
		if at.After(killed) && at.Before(taken.acquired) {
			late++
		}
	}
	if byNew == 0 {
		t.Fatalf("the new leader released no pod; standby log:\n%s", standby.log(40))
	}
	var pods corev1.PodList
	if err := k8s.List(h.ctx, &pods, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	unplaced := 0
	for i := range pods.Items {
		if pods.Items[i].Labels[placement.NodeAffinityLabel] != placement.LabelValueSet {
			unplaced++
		}
	}
	if unplaced > 0 {
		t.Errorf("%d of %d pods were released without their architecture affinity", unplaced, len(pods.Items))
	}
	t.Logf("HA takeover (load %s): leader killed (SIGKILL) with %d of %d pods gated; lease taken by the standby %v after the kill "+
		"(lease duration %ds); its first release %v after the kill, its last %v (%d pods, %.0f pods/s once it led); "+
		"%d released by the killed leader's last writes",
		loadAverage(), gatedAtKill, backlog, taken.acquired.Sub(killed).Round(time.Millisecond), taken.duration,
		firstNew.Sub(killed).Round(time.Millisecond), lastNew.Sub(killed).Round(time.Millisecond), byNew,
		float64(byNew)/max(lastNew.Sub(taken.acquired).Seconds(), 1e-3), late)
}

// leaseState is what the test reads of a leader election Lease.
type leaseState struct {
	holder   string
	acquired time.Time
	duration int32
}

func readLease(ctx context.Context, tb testing.TB, key types.NamespacedName) leaseState {
	tb.Helper()
	lease := &coordinationv1.Lease{}
	if err := k8s.Get(ctx, key, lease); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return leaseState{}
		}
		tb.Fatal(err)
	}
	var s leaseState
	if lease.Spec.HolderIdentity != nil {
		s.holder = *lease.Spec.HolderIdentity
	}
	if lease.Spec.AcquireTime != nil {
		s.acquired = lease.Spec.AcquireTime.Time
	}
	if lease.Spec.LeaseDurationSeconds != nil {
		s.duration = *lease.Spec.LeaseDurationSeconds
	}
	return s
}

// waitLeaseHolder waits until the lease's holder satisfies ok.
func waitLeaseHolder(ctx context.Context, tb testing.TB, key types.NamespacedName, ok func(holder string) bool) leaseState {
	tb.Helper()
	var s leaseState
	if err := wait.PollUntilContextTimeout(ctx, bed.Interval, bed.CaseTimeout, true, func(ctx context.Context) (bool, error) {
		s = readLease(ctx, tb, key)
		return ok(s.holder), nil
	}); err != nil {
		tb.Fatalf("lease %s: holder %q: %v", key, s.holder, err)
	}
	return s
}

// TestLeaderStoppedWithSIGTERM stops the leading replica with SIGTERM, as a
// rolling update or a node drain does, while gated pods wait (the leader
// throttled to 10 requests/s so that some do), and checks that the standby
// places every one of them: a leader stopped while the
// ClusterPodPlacementConfig lives leaves the gated pods to the next leader
// and frees its election lease at once. Both replicas run with the lease
// timing flags (retry period 1 s) and the test checks the lease carries
// them. It logs the handover (run with -v): from SIGTERM to the standby
// leading, to its first and last release, and to the old leader's exit.
func TestLeaderStoppedWithSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds build-controller")
	}
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "handover", nil)
	bin := buildPlacementBinary(h.ctx, t, t.TempDir())
	suiteController.stop()
	t.Cleanup(func() {
		var err error
		if suiteController, err = startController(suiteOptions()); err != nil {
			t.Errorf("restarting the suite controller: %v", err)
		}
	})
	dir := t.TempDir()
	const leaseSeconds = 12
	elect := []string{"--leader-elect=true", "--leader-election-namespace=" + h.ns,
		fmt.Sprintf("--leader-elect-lease-duration=%ds", leaseSeconds), "--leader-elect-renew-deadline=8s", "--leader-elect-retry-period=1s"}
	key := types.NamespacedName{Namespace: h.ns, Name: leaderElectionLease}
	leader := startPlacementProcess(h.ctx, t, bin, dir, "leader", append(elect, "--kube-api-qps=10")...)
	first := waitLeaseHolder(h.ctx, t, key, func(holder string) bool { return holder != "" }).holder
	standby := startPlacementProcess(h.ctx, t, bin, dir, "standby", elect...)
	if held := readLease(h.ctx, t, key); held.duration != leaseSeconds {
		t.Errorf("the election lease lasts %ds, want the %ds of --leader-elect-lease-duration", held.duration, leaseSeconds)
	}

	const backlog = 100
	names := make([]string, backlog)
	for i := range names {
		names[i] = fmt.Sprintf("handover-%03d", i)
	}
	rw := watchReleases(t, h.ns)
	if err := createPods(h.ctx, backlog, 20, func(i int) *corev1.Pod {
		return makePod(h.ns, names[i]).image(imgAll).nodeSelector(unschedulableKey, "true").withGate().obj()
	}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(h.ctx, bed.Interval, bed.LongTimeout, true, func(context.Context) (bool, error) {
		return rw.count() > 0, nil
	}); err != nil {
		t.Fatalf("the leader released no pod: %v; log:\n%s", err, leader.log(40))
	}
	gatedAtStop, _, err := countGated(h.ctx, h.ns)
	if err != nil {
		t.Fatal(err)
	}
	if gatedAtStop == 0 {
		t.Fatal("no pod was gated when the leader was stopped: nothing to hand over")
	}
	stopped := time.Now()
	exitedc := make(chan time.Time, 1)
	go func() {
		if err := leader.stop(); err != nil {
			t.Errorf("the leader exited with %v; log:\n%s", err, leader.log(40))
		}
		exitedc <- time.Now()
	}()
	waitLeaseHolder(h.ctx, t, key, func(holder string) bool { return holder != first })
	freed := time.Now()
	taken := waitLeaseHolder(h.ctx, t, key, func(holder string) bool { return holder != "" && holder != first })
	rw.wait(t, names, bed.CaseTimeout)
	exited := <-exitedc

	// Every pod placed: by the leader before SIGTERM, by its reconciles
	// still in flight, or by the standby.
	var pods corev1.PodList
	if err := k8s.List(h.ctx, &pods, client.InNamespace(h.ns)); err != nil {
		t.Fatal(err)
	}
	var unplaced []string
	for i := range pods.Items {
		if pods.Items[i].Labels[placement.NodeAffinityLabel] != placement.LabelValueSet {
			unplaced = append(unplaced, pods.Items[i].Name)
		}
	}
	if len(unplaced) > 0 {
		t.Errorf("%d of %d pods (%d gated at SIGTERM) were released without their architecture affinity, e.g. %s; leader log:\n%s",
			len(unplaced), len(pods.Items), gatedAtStop, unplaced[0], leader.log(20))
	}
	byNew, firstNew, lastNew := releasedFrom(rw.times(names), taken.acquired)
	if byNew == 0 {
		t.Fatalf("the standby released no pod; its log:\n%s", standby.log(40))
	}
	t.Logf("handover on SIGTERM (load %s): %d of %d pods gated at SIGTERM; the leader freed its election lease %v after SIGTERM, the standby led %v after SIGTERM "+
		"(retry period 1s), released its first pod %v and its last %v after SIGTERM (%d pods); the old leader exited %v after SIGTERM; "+
		"%d pods released without placement",
		loadAverage(), gatedAtStop, backlog, freed.Sub(stopped).Round(time.Millisecond), taken.acquired.Sub(stopped).Round(time.Millisecond),
		firstNew.Sub(stopped).Round(time.Millisecond), lastNew.Sub(stopped).Round(time.Millisecond), byNew,
		exited.Sub(stopped).Round(time.Millisecond), len(unplaced))
}

// releasedFrom counts the release times at or after from (a new leader's
// releases), with the first and the last of them.
func releasedFrom(times []time.Time, from time.Time) (n int, first, last time.Time) {
	for _, at := range times {
		if at.Before(from) {
			continue
		}
		n++
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return n, first, last
}
