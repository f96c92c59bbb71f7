package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func TestProgressOnly(t *testing.T) {
	running := buildv1.BuildStatus{Phase: buildv1.BuildPhaseRunning, PlatformsSummary: "1/4"}
	for _, tt := range []struct {
		name string
		next func(buildv1.BuildStatus) buildv1.BuildStatus
		want bool
	}{
		{"the count alone", func(s buildv1.BuildStatus) buildv1.BuildStatus { s.PlatformsSummary = "2/4"; return s }, true},
		{"nothing", func(s buildv1.BuildStatus) buildv1.BuildStatus { return s }, false},
		{"the count and the phase", func(s buildv1.BuildStatus) buildv1.BuildStatus {
			s.PlatformsSummary, s.Phase = "4/4", buildv1.BuildPhaseComplete
			return s
		}, false},
		{"the count and the message", func(s buildv1.BuildStatus) buildv1.BuildStatus {
			s.PlatformsSummary, s.Message = "2/4", "x"
			return s
		}, false},
	} {
		if got := progressOnly(running, tt.next(running)); got != tt.want {
			t.Errorf("%s: progressOnly = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestProgressWait(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "b"}
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	p := newProgressWrites(time.Second)
	if w := p.wait(key, t0); w != 0 {
		t.Errorf("never written: wait %v, want 0", w)
	}
	p.wrote(key, t0, false)
	for _, tt := range []struct {
		now  time.Time
		want time.Duration
	}{
		{t0.Add(300 * time.Millisecond), 700 * time.Millisecond},
		{t0.Add(time.Second), 0},
		{t0.Add(time.Hour), 0},
		// A clock that went back counts as the interval having passed.
		{t0.Add(-time.Minute), 0},
	} {
		if w := p.wait(key, tt.now); w != tt.want {
			t.Errorf("wait at %v after the write = %v, want %v", tt.now.Sub(t0), w, tt.want)
		}
	}
	p.wrote(key, t0, true)
	if w := p.wait(key, t0); w != 0 {
		t.Errorf("after a terminal write: wait %v, want 0", w)
	}
	none := newProgressWrites(-1)
	none.wrote(key, t0, false)
	if w := none.wait(key, t0); w != 0 {
		t.Errorf("batching off: wait %v, want 0", w)
	}
}
