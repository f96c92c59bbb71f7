package podcontroller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// retryPolicy bounds the inspections of one pod: exponential delays in
// time, not counted on the pod's own update events.
type retryPolicy struct {
	tries    int
	base     time.Duration
	max      time.Duration
	deadline time.Duration
}

// retryState is what is known about a pod's failed inspections.
type retryState struct {
	uid          types.UID
	failures     int
	firstFailure time.Time
}

// next decides, after one more failure at now, whether to retry and after
// how long. Retries stop after tries inspections in all, or once the next
// one would start after the deadline.
func (p retryPolicy) next(s retryState, now time.Time) (retry bool, delay time.Duration) {
	if s.failures >= p.tries {
		return false, 0
	}
	delay = p.base
	for i := 1; i < s.failures && delay < p.max; i++ {
		delay *= 2
	}
	delay = min(delay, p.max)
	if now.Add(delay).Sub(s.firstFailure) > p.deadline {
		return false, 0
	}
	return true, delay
}

// retryTracker remembers failed inspections per pod while the pod is
// retried. It lives in the reconciler: a restarted controller starts
// afresh, and every pod still gets a bounded number of tries. Pods are
// keyed by name; a new pod with an old pod's name (another UID) starts
// afresh.
type retryTracker struct {
	mu    sync.Mutex
	state map[types.NamespacedName]retryState
}

func newRetryTracker() *retryTracker {
	return &retryTracker{state: map[types.NamespacedName]retryState{}}
}

// failed records a failure of the pod at now and returns the updated state.
func (t *retryTracker) failed(pod types.NamespacedName, uid types.UID, now time.Time) retryState {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.state[pod]
	if !ok || s.uid != uid {
		s = retryState{uid: uid, firstFailure: now}
	}
	s.failures++
	t.state[pod] = s
	return s
}

// forget drops a pod that was released or is gone.
func (t *retryTracker) forget(pod types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.state, pod)
}

func (t *retryTracker) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.state)
}
