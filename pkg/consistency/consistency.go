// Package consistency lets a controller read its own writes through an
// informer cache that lags behind them.
//
// A reconcile that writes an object (a status, an annotation) leaves the
// version it read, and every version but the last it produced, behind. The
// cache may still hand the next reconcile one of those versions: deciding
// on it would redo work the controller has already done, and writing with
// its resource version would only conflict. A Tracker remembers the
// versions each object's own writes left behind, and Begin refuses a
// reconcile of one of them: the watch event of the last write is on its
// way and brings the object back.
//
// Resource versions are compared for equality only (they are opaque, and
// unique per write across the cluster), so a version never matches an
// object recreated under the same name, and another writer's newer version
// is never refused.
package consistency

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Tracker remembers, for each object, the resource versions the
// controller's own writes have left behind. It is safe for concurrent use
// by reconciles of different objects; a controller reconciles one object
// at a time (the work queue's guarantee). A nil *Tracker remembers nothing
// and refuses no reconcile.
type Tracker struct {
	mu      sync.Mutex
	objects map[types.NamespacedName]*written
}

// written is what one object's own writes left: the last version they
// produced, and the versions behind it.
type written struct {
	latest string
	behind sets.Set[string]
}

// NewTracker returns a Tracker that remembers nothing yet.
func NewTracker() *Tracker {
	return &Tracker{objects: map[types.NamespacedName]*written{}}
}

// Begin starts a reconcile of obj, as read from the cache. ok is false
// when obj is a version the controller's own writes have left behind: the
// reconcile should end without acting. Reading the last version written
// forgets the object: the cache has caught up. The reconcile calls Done on
// the Session when it ends (defer), having written or not.
func (t *Tracker) Begin(obj metav1.Object) (s *Session, ok bool) {
	key := keyOf(obj)
	if t.stale(key, obj.GetResourceVersion()) {
		return nil, false
	}
	return &Session{tracker: t, key: key, obj: obj, read: obj.GetResourceVersion()}, true
}

// Forget drops what is known of an object: it is gone, or the controller
// has no more writes to make to it (finished).
func (t *Tracker) Forget(key types.NamespacedName) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.objects, key)
}

// Len is the number of objects remembered.
func (t *Tracker) Len() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.objects)
}

// stale reports whether rv is a version of key that the controller's own
// later writes have left behind, and forgets key when rv is the last.
func (t *Tracker) stale(key types.NamespacedName, rv string) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.objects[key]
	switch {
	case w == nil:
		return false
	case rv == w.latest:
		delete(t.objects, key)
		return false
	}
	return w.behind.Has(rv)
}

// wrote records a reconcile of key that read version read and whose writes
// produced versions produced, in order. A reconcile that wrote nothing
// records nothing.
func (t *Tracker) wrote(key types.NamespacedName, read string, produced []string) {
	if t == nil || len(produced) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.objects[key]
	if w == nil {
		w = &written{behind: sets.New[string]()}
		t.objects[key] = w
	}
	if w.latest != "" {
		w.behind.Insert(w.latest)
	}
	w.behind.Insert(read)
	w.behind.Insert(produced[:len(produced)-1]...)
	w.latest = produced[len(produced)-1]
	w.behind.Delete(w.latest)
}

// Session is one reconcile's writes to one object. It notes the object's
// resource version after each write; the object's client call (Update,
// Patch, Apply) sets it.
type Session struct {
	tracker  *Tracker
	key      types.NamespacedName
	obj      metav1.Object // the copy whose resourceVersion each write updates
	read     string
	produced []string
}

// Follow makes obj the copy later writes update: the same object read
// again (from the apiserver) during the reconcile.
func (s *Session) Follow(obj metav1.Object) {
	s.obj = obj
}

// Wrote notes the followed copy's resource version after a write. A
// version already noted, or the one read, is not noted again: a write
// that changed nothing produced no version.
func (s *Session) Wrote() {
	rv := s.obj.GetResourceVersion()
	if rv != s.read && (len(s.produced) == 0 || s.produced[len(s.produced)-1] != rv) {
		s.produced = append(s.produced, rv)
	}
}

// Done notes the followed copy's version (Wrote) and records what the
// reconcile's writes left behind in the Tracker.
func (s *Session) Done() {
	s.Wrote()
	s.tracker.wrote(s.key, s.read, s.produced)
}

func keyOf(obj metav1.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}
