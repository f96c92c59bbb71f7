package docker

import (
	"context"
	"sync"
	"time"
)

// runningReport reports Running at most once: when begin is called (the
// Dockerfile's steps begin) or once a delay has passed, whichever comes
// first, and never once end was called (the outcome is being reported).
// The report runs beside the build; end waits for one that began.
type runningReport struct {
	ctx    context.Context
	report func(context.Context) error
	timer  *time.Timer
	done   chan struct{}
	err    error

	mu     sync.Mutex
	begun  bool
	closed bool
}

func startRunningReport(ctx context.Context, report func(context.Context) error, after time.Duration) *runningReport {
	r := &runningReport{ctx: ctx, report: report, done: make(chan struct{})}
	r.timer = time.AfterFunc(after, r.begin)
	return r
}

// begin starts the report unless it has begun or end was called.
func (r *runningReport) begin() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.begun || r.closed {
		return
	}
	r.begun = true
	go func() {
		defer close(r.done)
		r.err = r.report(r.ctx)
	}()
}

// end keeps a report that has not begun from ever beginning, and waits for
// one that has; it returns that report's error.
func (r *runningReport) end() error {
	r.timer.Stop()
	r.mu.Lock()
	r.closed = true
	begun := r.begun
	r.mu.Unlock()
	if !begun {
		return nil
	}
	<-r.done
	return r.err
}
