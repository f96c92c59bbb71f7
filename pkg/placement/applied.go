package placement

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// appliedCounter counts, in memory, the pods placed with a preference from
// each PodPlacementConfig; the config status controller adds the counts to
// the configs' status, so a burst of pods costs one status write per
// config, not one per pod.
type appliedCounter struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]applied
	// notify wakes the status controller for a config with counts.
	notify chan event.TypedGenericEvent[client.Object]
}

type applied struct {
	pods int64
	last time.Time
}

func newAppliedCounter() *appliedCounter {
	return &appliedCounter{pending: map[types.NamespacedName]applied{}, notify: make(chan event.TypedGenericEvent[client.Object], 1024)}
}

// record counts one pod placed with a preference of config key at t.
func (c *appliedCounter) record(key types.NamespacedName, t time.Time) {
	c.mu.Lock()
	a, had := c.pending[key]
	a.pods++
	if t.After(a.last) {
		a.last = t
	}
	c.pending[key] = a
	c.mu.Unlock()
	if !had {
		obj := &multiarchv1beta1.PodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		select {
		case c.notify <- event.TypedGenericEvent[client.Object]{Object: obj}:
		default: // the periodic resync of the configs picks it up
		}
	}
}

// take returns and forgets the counts of key.
func (c *appliedCounter) take(key types.NamespacedName) applied {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.pending[key]
	delete(c.pending, key)
	return a
}

// putBack returns counts whose write failed.
func (c *appliedCounter) putBack(key types.NamespacedName, a applied) {
	if a.pods == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending[key]
	p.pods += a.pods
	if a.last.After(p.last) {
		p.last = a.last
	}
	c.pending[key] = p
}
