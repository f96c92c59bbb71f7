package podcontroller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestRetryPolicy(t *testing.T) {
	p := retryPolicy{tries: 5, base: 4 * time.Second, max: 20 * time.Second, deadline: 2 * time.Minute}
	t0 := time.Unix(0, 0)
	tests := []struct {
		name      string
		failures  int
		elapsed   time.Duration
		wantRetry bool
		wantDelay time.Duration
	}{
		{"first failure", 1, 0, true, 4 * time.Second},
		{"second", 2, 5 * time.Second, true, 8 * time.Second},
		{"third", 3, 15 * time.Second, true, 16 * time.Second},
		{"fourth is capped", 4, 35 * time.Second, true, 20 * time.Second},
		{"tries exhausted", 5, 60 * time.Second, false, 0},
		{"deadline would pass", 2, 115 * time.Second, false, 0},
	}
	for _, tt := range tests {
		retry, delay := p.next(retryState{failures: tt.failures, firstFailure: t0}, t0.Add(tt.elapsed))
		if retry != tt.wantRetry || delay != tt.wantDelay {
			t.Errorf("%s: retry=%v delay=%v, want %v %v", tt.name, retry, delay, tt.wantRetry, tt.wantDelay)
		}
	}
}

func TestRetryTracker(t *testing.T) {
	tr := newRetryTracker()
	t0 := time.Unix(100, 0)
	pod := types.NamespacedName{Namespace: "app", Name: "p"}
	if s := tr.failed(pod, "uid-1", t0); s.failures != 1 || !s.firstFailure.Equal(t0) {
		t.Errorf("first failure: %+v", s)
	}
	if s := tr.failed(pod, "uid-1", t0.Add(time.Second)); s.failures != 2 || !s.firstFailure.Equal(t0) {
		t.Errorf("second failure keeps the first time: %+v", s)
	}
	if s := tr.failed(pod, "uid-2", t0.Add(time.Hour)); s.failures != 1 || !s.firstFailure.Equal(t0.Add(time.Hour)) {
		t.Errorf("a new pod with the same name starts afresh: %+v", s)
	}
	tr.forget(pod)
	if tr.len() != 0 {
		t.Error("forget must drop the pod")
	}
}
