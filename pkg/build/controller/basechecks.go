package controller

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// baseChecksPerNamespace bounds the base-image checks that run at once for
// the Builds of one namespace; the namespace's other checks wait their
// turn. A tenant whose registry never answers holds this many checks, for
// baseInspectionTimeout each, and no worker of the controller.
const baseChecksPerNamespace = 4

// baseChecks runs the inspections of the base-image check before the
// fan-out off the controller's workers: a reconcile starts a Build's check
// and returns, and the check's end enqueues the Build again, whose next
// reconcile takes the result. A registry that is slow or never answers so
// holds a goroutine, never one of the workers that every Build of the
// cluster shares; and each namespace runs at most baseChecksPerNamespace
// checks at once, so one tenant's Builds cannot delay another's checks.
type baseChecks struct {
	// ctx ends every check when the controller stops.
	ctx context.Context
	// done receives the Build of each check that ended.
	done chan event.GenericEvent

	mu      sync.Mutex
	builds  map[types.NamespacedName]*baseCheck
	running map[string]int             // namespace -> checks running
	queued  map[string][]*baseCheck    // namespace -> checks waiting, in order
	onStart func(types.NamespacedName) // tests: a check began (nil: nothing)
}

// baseCheck is one Build's check: queued, running, or ended with its
// result.
type baseCheck struct {
	key    types.NamespacedName
	uid    types.UID
	run    func(context.Context) []BaseCheck
	ended  bool
	result []BaseCheck
}

func newBaseChecks(ctx context.Context) *baseChecks {
	return &baseChecks{
		ctx:     ctx,
		done:    make(chan event.GenericEvent),
		builds:  map[types.NamespacedName]*baseCheck{},
		running: map[string]int{},
		queued:  map[string][]*baseCheck{},
	}
}

// result returns the ended check of Build b, once (the check is forgotten
// as it is returned), or starts run as b's check (queued behind the
// namespace's running checks) and returns false, as it does while the
// check runs. A Build of the same name but another UID has its own check.
func (c *baseChecks) result(b *buildv1.Build, run func(context.Context) []BaseCheck) ([]BaseCheck, bool) {
	key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	if bc, ok := c.builds[key]; ok && bc.uid == b.UID {
		if !bc.ended {
			return nil, false
		}
		delete(c.builds, key)
		return bc.result, true
	}
	bc := &baseCheck{key: key, uid: b.UID, run: run}
	c.builds[key] = bc
	if c.running[key.Namespace] < baseChecksPerNamespace {
		c.startLocked(bc)
	} else {
		c.queued[key.Namespace] = append(c.queued[key.Namespace], bc)
	}
	return nil, false
}

// forget drops the check of a Build that is gone (a running check ends
// without enqueueing it).
func (c *baseChecks) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	bc, ok := c.builds[key]
	if !ok {
		return
	}
	delete(c.builds, key)
	queued := c.queued[key.Namespace]
	for i, q := range queued {
		if q == bc {
			c.queued[key.Namespace] = append(queued[:i:i], queued[i+1:]...)
			break
		}
	}
	if len(c.queued[key.Namespace]) == 0 {
		delete(c.queued, key.Namespace)
	}
}

func (c *baseChecks) startLocked(bc *baseCheck) {
	c.running[bc.key.Namespace]++
	if c.onStart != nil {
		c.onStart(bc.key)
	}
	go c.runCheck(bc)
}

// runCheck runs bc, keeps its result while bc is still the Build's check,
// starts the namespace's next queued check and enqueues the Build.
func (c *baseChecks) runCheck(bc *baseCheck) {
	result := bc.run(c.ctx)
	c.mu.Lock()
	current := c.builds[bc.key] == bc
	if current {
		bc.ended, bc.result = true, result
	}
	ns := bc.key.Namespace
	c.running[ns]--
	if q := c.queued[ns]; len(q) > 0 {
		next := q[0]
		c.queued[ns] = q[1:]
		if len(c.queued[ns]) == 0 {
			delete(c.queued, ns)
		}
		c.startLocked(next)
	}
	if c.running[ns] == 0 {
		delete(c.running, ns)
	}
	c.mu.Unlock()
	if !current {
		return
	}
	ev := &buildv1.Build{}
	ev.Namespace, ev.Name = bc.key.Namespace, bc.key.Name
	select {
	case c.done <- event.GenericEvent{Object: ev}:
	case <-c.ctx.Done():
	}
}
