package webhook

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"github.com/archway-build/archway/pkg/placement"
)

// gateEvents records ArchAwareSchedGateAdded for the pods the webhook
// gated, off the admission path. At admission a pod has no UID and often no
// name yet (generateName), so an event then could not be tied to it: the
// webhook notes the pod as expected, and the event is recorded when the
// webhook's informer of gated pods first sees it persisted. Each replica
// records only for the pods it admitted; expectations not met within ttl
// (the create failed later) are dropped.
type gateEvents struct {
	recorder events.EventRecorder
	ttl      time.Duration
	now      func() time.Time

	mu        sync.Mutex
	pending   map[string][]time.Time // expectation key -> admission times, oldest first
	lastPrune time.Time
}

func newGateEvents(recorder events.EventRecorder, ttl time.Duration) *gateEvents {
	return &gateEvents{recorder: recorder, ttl: ttl, now: time.Now, pending: map[string][]time.Time{}}
}

// expectationKey names a pod by namespace and name, or by namespace and
// generateName when the apiserver has yet to choose the name.
func expectationKey(namespace, name, generateName string) string {
	if name != "" {
		return namespace + "/" + name
	}
	return namespace + "/~" + generateName
}

// expect notes that the pod was gated at admission.
func (g *gateEvents) expect(namespace string, pod *corev1.Pod) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	key := expectationKey(namespace, pod.Name, pod.GenerateName)
	g.pending[key] = append(g.pending[key], now)
	if now.Sub(g.lastPrune) > g.ttl {
		g.prune(now)
	}
}

// observe is called with every gated pod the informer sees for the first
// time; it records the event when this replica admitted the pod.
func (g *gateEvents) observe(pod *corev1.ObjectReference, generateName string) {
	now := g.now()
	if !g.take(expectationKey(pod.Namespace, pod.Name, ""), now) &&
		(generateName == "" || !g.take(expectationKey(pod.Namespace, "", generateName), now)) {
		return
	}
	g.recorder.Eventf(pod, nil, corev1.EventTypeNormal, placement.EventSchedGateAdded, "Gate",
		"Successfully gated with the %s scheduling gate", placement.SchedulingGate)
}

// take consumes the oldest live expectation under key.
func (g *gateEvents) take(key string, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	times := g.pending[key]
	for len(times) > 0 && now.Sub(times[0]) > g.ttl {
		times = times[1:]
	}
	if len(times) == 0 {
		delete(g.pending, key)
		return false
	}
	if len(times) == 1 {
		delete(g.pending, key)
	} else {
		g.pending[key] = times[1:]
	}
	return true
}

// prune drops expired expectations; g.mu is held.
func (g *gateEvents) prune(now time.Time) {
	g.lastPrune = now
	for key, times := range g.pending {
		for len(times) > 0 && now.Sub(times[0]) > g.ttl {
			times = times[1:]
		}
		if len(times) == 0 {
			delete(g.pending, key)
		} else {
			g.pending[key] = times
		}
	}
}

func (g *gateEvents) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}
