package consistency

import (
	"fmt"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// reconcile is one reconcile of the object in a table: it reads version
// read from the cache and, when Begin lets it go on, its writes produce
// versions writes, in order.
type reconcile struct {
	read    string
	refused bool // Begin refuses the version read
	writes  []string
}

func TestTracker(t *testing.T) {
	cases := []struct {
		name       string
		reconciles []reconcile
		remembered int
	}{
		{"an object never written is never refused", []reconcile{{read: "5"}}, 0},
		{"a reconcile that wrote nothing records nothing", []reconcile{{read: "5"}, {read: "5"}}, 0},
		{"resolution then fan-out: the versions left behind are refused", []reconcile{
			{read: "10", writes: []string{"11"}},       // platforms into the status
			{read: "11", writes: []string{"12", "13"}}, // annotations with the pods, then Pending
			{read: "11", refused: true},                // the cache still at the resolution (the fan-out read it: it goes back no further)
			{read: "12", refused: true},                // at the annotations
			{read: "13"},                               // caught up: forgotten
			{read: "12"},                               // forgotten: nothing is refused any more
		}, 0},
		{"another writer's version is not refused", []reconcile{
			{read: "20", writes: []string{"21"}},
			{read: "25"}, // a builder's write after ours
			{read: "20", refused: true},
		}, 1},
		{"a write that changed nothing records nothing", []reconcile{
			{read: "30", writes: []string{"30"}},
			{read: "30"},
		}, 0},
		{"a write repeated at the same version is noted once", []reconcile{
			{read: "40", writes: []string{"41", "41", "42"}},
			{read: "41", refused: true},
			{read: "42"},
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker()
			for i, rc := range tc.reconciles {
				obj := &metav1.ObjectMeta{Namespace: "ns", Name: "app", ResourceVersion: rc.read}
				s, ok := tr.Begin(obj)
				if ok == rc.refused {
					t.Fatalf("reconcile %d: Begin(%s) ok = %v, want %v", i, rc.read, ok, !rc.refused)
				}
				if !ok {
					continue
				}
				for _, rv := range rc.writes {
					obj.ResourceVersion = rv
					s.Wrote()
				}
				s.Done()
			}
			if got := tr.Len(); got != tc.remembered {
				t.Errorf("remembers %d objects, want %d", got, tc.remembered)
			}
			tr.Forget(types.NamespacedName{Namespace: "ns", Name: "app"})
			if tr.Len() != 0 {
				t.Error("Forget left the object")
			}
		})
	}
}

// TestSessionFollow: the writes to a copy read again during the reconcile
// are the ones noted, and Done notes the last without a Wrote. The version
// read again is another writer's: not refused.
func TestSessionFollow(t *testing.T) {
	tr := NewTracker()
	cached := &metav1.ObjectMeta{Namespace: "ns", Name: "app", ResourceVersion: "1"}
	s, ok := tr.Begin(cached)
	if !ok {
		t.Fatal("Begin refused an object never written")
	}
	fresh := &metav1.ObjectMeta{Namespace: "ns", Name: "app", ResourceVersion: "3"} // read from the apiserver
	s.Follow(fresh)
	fresh.ResourceVersion = "4" // the status write
	s.Done()
	for _, c := range []struct {
		rv      string
		refused bool
	}{{"1", true}, {"3", false}, {"4", false}} {
		if _, ok := tr.Begin(&metav1.ObjectMeta{Namespace: "ns", Name: "app", ResourceVersion: c.rv}); ok == c.refused {
			t.Errorf("Begin(%s) ok = %v, want %v", c.rv, ok, !c.refused)
		}
	}
}

// TestObjectsAreApart: one object's writes refuse no version of another,
// in another namespace or under another name.
func TestObjectsAreApart(t *testing.T) {
	tr := NewTracker()
	written := &metav1.ObjectMeta{Namespace: "a", Name: "app", ResourceVersion: "1"}
	s, _ := tr.Begin(written)
	written.ResourceVersion = "2"
	s.Done()
	for _, obj := range []*metav1.ObjectMeta{
		{Namespace: "b", Name: "app", ResourceVersion: "1"},
		{Namespace: "a", Name: "other", ResourceVersion: "1"},
	} {
		if _, ok := tr.Begin(obj); !ok {
			t.Errorf("Begin(%s/%s@1) refused after a write to a/app", obj.Namespace, obj.Name)
		}
	}
	if _, ok := tr.Begin(&metav1.ObjectMeta{Namespace: "a", Name: "app", ResourceVersion: "1"}); ok {
		t.Error("Begin(a/app@1) not refused after a write to a/app")
	}
}

func TestNilTrackerRefusesNothing(t *testing.T) {
	var tr *Tracker
	obj := &metav1.ObjectMeta{Namespace: "ns", Name: "app", ResourceVersion: "1"}
	s, ok := tr.Begin(obj)
	if !ok {
		t.Fatal("a nil Tracker refused a reconcile")
	}
	obj.ResourceVersion = "2"
	s.Done()
	if _, ok := tr.Begin(&metav1.ObjectMeta{Namespace: "ns", Name: "app", ResourceVersion: "1"}); !ok {
		t.Error("a nil Tracker remembered a write")
	}
	tr.Forget(types.NamespacedName{Namespace: "ns", Name: "app"})
	if tr.Len() != 0 {
		t.Error("a nil Tracker remembers objects")
	}
}

// TestConcurrentReconciles: reconciles of different objects at once, as a
// controller's workers run them (go test -race checks the locking).
func TestConcurrentReconciles(t *testing.T) {
	tr := NewTracker()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			name := fmt.Sprintf("app-%d", i)
			for v := 1; v < 50; v += 2 {
				obj := &metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: fmt.Sprint(v)}
				s, ok := tr.Begin(obj)
				if !ok {
					t.Errorf("%s@%d refused", name, v)
					return
				}
				obj.ResourceVersion = fmt.Sprint(v + 1)
				s.Done()
			}
		})
	}
	wg.Wait()
	if got := tr.Len(); got != 16 {
		t.Errorf("remembers %d objects, want 16", got)
	}
}
