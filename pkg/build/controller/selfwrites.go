package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// selfWrites remembers, for each Build, the resource versions the
// controller's own writes have left behind: the versions it read and wrote
// over, and every version but the last it produced. The informer's copy of a
// Build lags behind those writes; a reconcile that reads one of the versions
// left behind would decide on a state the controller has already moved past
// (and, writing with that resource version, only conflict). It skips
// instead: the watch event of the last write is on its way and brings the
// Build back.
//
// Resource versions are unique per write across the cluster, so a version
// never matches a Build recreated under the same name. A nil *selfWrites
// remembers nothing.
type selfWrites struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*selfWrite
}

type selfWrite struct {
	latest string
	behind sets.Set[string]
}

func newSelfWrites() *selfWrites {
	return &selfWrites{m: map[types.NamespacedName]*selfWrite{}}
}

// stale reports whether rv is a version of the Build that the controller's
// own later writes have left behind. Reading the latest version written
// forgets the Build: the informer has caught up.
func (s *selfWrites) stale(key types.NamespacedName, rv string) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.m[key]
	switch {
	case w == nil:
		return false
	case rv == w.latest:
		delete(s.m, key)
		return false
	}
	return w.behind.Has(rv)
}

// wrote records a reconcile that read version read and whose writes
// produced versions produced, in order. Nothing is recorded when it wrote
// nothing.
func (s *selfWrites) wrote(key types.NamespacedName, read string, produced []string) {
	if s == nil || len(produced) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.m[key]
	if w == nil {
		w = &selfWrite{behind: sets.New[string]()}
		s.m[key] = w
	}
	if w.latest != "" {
		w.behind.Insert(w.latest)
	}
	w.behind.Insert(read)
	w.behind.Insert(produced[:len(produced)-1]...)
	w.latest = produced[len(produced)-1]
	w.behind.Delete(w.latest)
}

// forget drops what is known of a Build (gone, or finished).
func (s *selfWrites) forget(key types.NamespacedName) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// len is the number of Builds remembered.
func (s *selfWrites) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
