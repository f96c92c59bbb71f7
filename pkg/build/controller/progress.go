package controller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// ProgressInterval is the default of Options.ProgressInterval: how often,
// at most, a Build's status is written for its progress alone
// (status.platformsSummary, "2/4"). A platform that ends within that time
// of the controller's last write of the Build is counted in the next
// write, whatever brings it. The platforms of a warm build end within a
// fraction of a second of each other; writing each count would be as many
// more writes of the whole status (and watch events to every watcher) for a
// figure nobody reads in between.
const ProgressInterval = time.Second

// progressWrites remembers when the controller last wrote each Build's
// status, to batch progress-only writes. A nil
// *progressWrites batches nothing. What it forgets (a restart) only makes
// the next progress write come at once.
type progressWrites struct {
	every time.Duration
	mu    sync.Mutex
	last  map[types.NamespacedName]time.Time
}

// newProgressWrites batches progress-only writes over every (nil, batching
// nothing, when every is negative).
func newProgressWrites(every time.Duration) *progressWrites {
	switch {
	case every < 0:
		return nil
	case every == 0:
		every = ProgressInterval
	}
	return &progressWrites{every: every, last: map[types.NamespacedName]time.Time{}}
}

// wait is how long a progress-only write of the Build waits: zero once
// the interval has passed since the controller's last write of it.
func (p *progressWrites) wait(key types.NamespacedName, now time.Time) time.Duration {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[key]
	if !ok {
		return 0
	}
	// A clock that went back counts as a full interval having passed.
	if d := last.Add(p.every).Sub(now); d > 0 && d <= p.every {
		return d
	}
	return 0
}

// wrote records a write of the Build's status at the given time; a
// terminal one forgets the Build.
func (p *progressWrites) wrote(key types.NamespacedName, at time.Time, terminal bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if terminal {
		delete(p.last, key)
		return
	}
	p.last[key] = at
}

// forget drops what is known of a Build (gone, or ended).
func (p *progressWrites) forget(key types.NamespacedName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, key)
}

// progressOnly reports whether next differs from cur in the progress
// count alone.
func progressOnly(cur, next buildv1.BuildStatus) bool {
	if cur.PlatformsSummary == next.PlatformsSummary || next.Phase.IsTerminal() {
		return false
	}
	cur.PlatformsSummary = next.PlatformsSummary
	return equality.Semantic.DeepEqual(cur, next)
}
