package policy

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

// The webhook may admit hundreds of pods a second; writing a policy's
// status for each would cost the apiserver a write per pod per policy.
// StatusRecorder counts in memory instead and adds what it counted to each
// policy's status once per interval: one write per policy per interval at
// most, whatever the rate of pods.
//
// Every replica of the webhook counts the pods it admitted and flushes its
// own counts, so the replicas need no leader. A flush patches the status
// with the resourceVersion it read (an optimistic lock): when another
// replica wrote in between, the patch fails with a conflict and the counts
// stay pending for the next flush, so no replica's count is lost or added
// twice.

// StatusRecorder aggregates policy applications and flushes them into the
// policies' status. It is a manager Runnable that runs on every replica.
type StatusRecorder struct {
	reader   client.Reader // the informer cache
	direct   client.Reader // the apiserver, read on shutdown; nil: reader
	writer   client.Client
	interval time.Duration
	writes   *prometheus.CounterVec
	log      logr.Logger

	mu      sync.Mutex
	pending map[policyKey]*applied
	// stopped is set when the manager stops the recorder. The webhook
	// server stops after it (controller-runtime stops webhooks last, so
	// that requests under way finish), so pods admitted from then on are
	// written one by one as they come rather than left pending.
	stopped bool
}

// drainTimeout bounds the writes of the pending counts when the recorder
// stops, and each write of a count recorded after that.
const drainTimeout = 5 * time.Second

// policyKey identifies a policy; the UID keeps a recreated policy from
// inheriting the counts of the one it replaces.
type policyKey struct {
	kind      string
	namespace string
	name      string
	uid       types.UID
}

// applied is what a replica has counted and not yet written.
type applied struct {
	pods int64
	last time.Time
	// skipped counts pods with parts of the policy not applied;
	// lastSkipped is the latest object (pod or workload) with any.
	skipped     int64
	lastSkipped *kupidv1alpha1.SkippedParts
}

// add adds b to a.
func (a *applied) add(b *applied) {
	a.pods += b.pods
	if b.last.After(a.last) {
		a.last = b.last
	}
	a.skipped += b.skipped
	if b.lastSkipped != nil && (a.lastSkipped == nil || b.lastSkipped.Time.After(a.lastSkipped.Time.Time)) {
		a.lastSkipped = b.lastSkipped
	}
}

// NewStatusRecorder returns a recorder that reads policies from reader,
// writes with writer every interval and counts its writes in writes (nil
// for none).
func NewStatusRecorder(reader client.Reader, writer client.Client, interval time.Duration, writes *prometheus.CounterVec, log logr.Logger) *StatusRecorder {
	return &StatusRecorder{reader: reader, writer: writer, interval: interval, writes: writes, log: log, pending: map[policyKey]*applied{}}
}

// SetDirectReader makes r read the policies from direct (the apiserver)
// when it retries a conflicting write on shutdown; by default it rereads
// its informer cache, which may lag behind the write that conflicted.
func SetDirectReader(r *StatusRecorder, direct client.Reader) { r.direct = direct }

// Record counts one pod p was applied to at time at. Once the recorder has
// stopped, the count is written at once.
func (r *StatusRecorder) Record(p Policy, at time.Time) {
	r.record(p, &applied{pods: 1, last: at})
}

// RecordSkipped records that parts of p were not applied to an object
// (counted in skippedPods when it is a pod).
func (r *StatusRecorder) RecordSkipped(p Policy, s kupidv1alpha1.SkippedParts, pod bool) {
	a := &applied{lastSkipped: &s}
	if pod {
		a.skipped = 1
	}
	r.record(p, a)
}

func (r *StatusRecorder) record(p Policy, add *applied) {
	k := policyKey{kind: p.Kind, namespace: p.Namespace, name: p.Name, uid: p.UID}
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		r.writeNow(k, add)
		return
	}
	defer r.mu.Unlock()
	a := r.pending[k]
	if a == nil {
		a = &applied{}
		r.pending[k] = a
	}
	a.add(add)
}

// NeedLeaderElection is false: every replica flushes what it counted.
func (r *StatusRecorder) NeedLeaderElection() bool { return false }

// Start flushes every interval until ctx ends. Then it writes what is
// pending, retrying conflicts against the apiserver until drainTimeout, and
// from then on Record writes each count as it comes: no count is lost on a
// graceful shutdown.
func (r *StatusRecorder) Start(ctx context.Context) error {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			r.Flush(ctx)
		case <-ctx.Done():
			r.mu.Lock()
			r.stopped = true
			r.mu.Unlock()
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTimeout)
			defer cancel()
			r.drain(final)
			return nil
		}
	}
}

// drain flushes until nothing is pending or ctx ends, reading the policies
// from the apiserver: after a conflict the informer cache may not have the
// newer version yet.
func (r *StatusRecorder) drain(ctx context.Context) {
	for {
		r.flush(ctx, r.fresh())
		if len(r.Pending()) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			r.log.Error(ctx.Err(), "scheduling policies' status counts not written on shutdown", "pending", r.Pending())
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// writeNow writes one count, retrying conflicts until drainTimeout.
func (r *StatusRecorder) writeNow(k policyKey, a *applied) {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	for {
		result, err := r.write(ctx, r.fresh(), k, a)
		r.count(result)
		if result != "conflict" {
			if err != nil {
				r.log.Error(err, "writing a scheduling policy's status on shutdown", "kind", k.kind, "namespace", k.namespace, "name", k.name)
			}
			return
		}
		select {
		case <-ctx.Done():
			r.log.Error(err, "writing a scheduling policy's status on shutdown", "kind", k.kind, "namespace", k.namespace, "name", k.name)
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// fresh is the reader that sees the apiserver's current policies.
func (r *StatusRecorder) fresh() client.Reader {
	if r.direct != nil {
		return r.direct
	}
	return r.reader
}

// Flush writes the pending counts, one status patch per policy. Counts
// whose write conflicts or fails stay pending; those of policies that no
// longer exist are dropped.
func (r *StatusRecorder) Flush(ctx context.Context) {
	r.flush(ctx, r.reader)
}

func (r *StatusRecorder) flush(ctx context.Context, reader client.Reader) {
	r.mu.Lock()
	batch := r.pending
	r.pending = map[policyKey]*applied{}
	r.mu.Unlock()
	failed := map[policyKey]*applied{}
	for k, a := range batch {
		result, err := r.write(ctx, reader, k, a)
		r.count(result)
		switch {
		case result == "gone":
		case err != nil:
			failed[k] = a
			if result != "conflict" {
				r.log.Error(err, "writing a scheduling policy's status; retrying at the next flush", "kind", k.kind, "namespace", k.namespace, "name", k.name)
			}
		}
	}
	if len(failed) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, a := range r.pending {
		if f := failed[k]; f != nil {
			f.add(a)
		} else {
			failed[k] = a
		}
	}
	r.pending = failed
}

// Pending returns the counts not yet written, by "Kind/[namespace/]name".
func (r *StatusRecorder) Pending() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int64{}
	for k, a := range r.pending {
		out[Policy{Kind: k.kind, Namespace: k.namespace, Name: k.name}.Ref()] += a.pods
	}
	return out
}

func (r *StatusRecorder) count(result string) {
	if r.writes != nil && result != "gone" {
		r.writes.WithLabelValues(result).Inc()
	}
}

// write adds a to the policy's status: "ok", "conflict", "error", or
// "gone" when the policy is no longer there.
func (r *StatusRecorder) write(ctx context.Context, reader client.Reader, k policyKey, a *applied) (string, error) {
	var obj client.Object
	var status *kupidv1alpha1.PolicyStatus
	switch k.kind {
	case KindClusterPodSchedulingPolicy:
		p := &kupidv1alpha1.ClusterPodSchedulingPolicy{}
		obj, status = p, &p.Status
	default:
		p := &kupidv1alpha1.PodSchedulingPolicy{}
		obj, status = p, &p.Status
	}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: k.namespace, Name: k.name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return "gone", nil
		}
		return "error", err
	}
	if obj.GetUID() != k.uid {
		return "gone", nil
	}
	base := obj.DeepCopyObject().(client.Object)
	status.MatchedPods += a.pods
	if !a.last.IsZero() && (status.LastAppliedTime == nil || a.last.Truncate(time.Second).After(status.LastAppliedTime.Time)) {
		status.LastAppliedTime = &metav1.Time{Time: a.last.Truncate(time.Second)}
	}
	status.SkippedPods += a.skipped
	if s := a.lastSkipped; s != nil && (status.LastSkipped == nil || !s.Time.Truncate(time.Second).Before(status.LastSkipped.Time.Time)) {
		status.LastSkipped = s.DeepCopy()
		status.LastSkipped.Time = metav1.NewTime(s.Time.Truncate(time.Second))
	}
	err := r.writer.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	switch {
	case err == nil:
		return "ok", nil
	case apierrors.IsNotFound(err):
		return "gone", nil
	case apierrors.IsConflict(err):
		return "conflict", err
	default:
		return "error", err
	}
}
