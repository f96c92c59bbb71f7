package podcontroller

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// AppliedCounter counts, in memory, the pods placed with a preference from
// each PodPlacementConfig; the config status controller adds the counts to
// the configs' status, so a burst of pods costs one status write per
// config, not one per pod.
type AppliedCounter struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]applied
	// Notify wakes the status controller for a config with counts.
	Notify chan event.TypedGenericEvent[client.Object]
}

type applied struct {
	Pods int64
	Last time.Time
}

func newAppliedCounter() *AppliedCounter {
	return &AppliedCounter{pending: map[types.NamespacedName]applied{}, Notify: make(chan event.TypedGenericEvent[client.Object], 1024)}
}

// record counts one pod placed with a preference of config key at t.
func (c *AppliedCounter) record(key types.NamespacedName, t time.Time) {
	c.mu.Lock()
	a, had := c.pending[key]
	a.Pods++
	if t.After(a.Last) {
		a.Last = t
	}
	c.pending[key] = a
	c.mu.Unlock()
	if !had {
		obj := &multiarchv1beta1.PodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		select {
		case c.Notify <- event.TypedGenericEvent[client.Object]{Object: obj}:
		default: // the periodic resync of the configs picks it up
		}
	}
}

// Take returns and forgets the counts of key.
func (c *AppliedCounter) Take(key types.NamespacedName) applied {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.pending[key]
	delete(c.pending, key)
	return a
}

// PutBack returns counts whose write failed.
func (c *AppliedCounter) PutBack(key types.NamespacedName, a applied) {
	if a.Pods == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending[key]
	p.Pods += a.Pods
	if a.Last.After(p.Last) {
		p.Last = a.Last
	}
	c.pending[key] = p
}
