package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestSelfWrites(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "app"}
	type step struct {
		read      string
		produced  []string // a reconcile that read `read` and wrote these
		staleWant bool     // stale(read) before the reconcile
	}
	cases := []struct {
		name    string
		steps   []step
		wantLen int
	}{
		{"unknown build is never stale", []step{{read: "5", staleWant: false}}, 0},
		{"a reconcile that wrote nothing records nothing", []step{{read: "5"}, {read: "5"}}, 0},
		{"resolution then fan-out: the versions left behind are stale", []step{
			{read: "10", produced: []string{"11"}},               // platforms into the status
			{read: "11", produced: []string{"12", "13"}},         // annotations with the pods, then Pending
			{read: "11", staleWant: true},                        // the informer still at the resolution (the fan-out read it: it cannot go back further)
			{read: "12", staleWant: true},                        // at the annotations
			{read: "13", staleWant: false, produced: []string{}}, // caught up: forgotten
			{read: "12", staleWant: false},                       // forgotten: nothing is stale any more
		}, 0},
		{"a foreign write is not stale", []step{
			{read: "20", produced: []string{"21"}},
			{read: "25", staleWant: false}, // a builder's write after ours
			{read: "20", staleWant: true},
		}, 1},
		{"a write that changed nothing keeps its version current", []step{
			{read: "30", produced: []string{"30"}},
			{read: "30", staleWant: false},
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSelfWrites()
			for i, st := range tc.steps {
				if got := s.stale(key, st.read); got != st.staleWant {
					t.Fatalf("step %d: stale(%s) = %v, want %v", i, st.read, got, st.staleWant)
				}
				s.wrote(key, st.read, st.produced)
			}
			if s.len() != tc.wantLen {
				t.Errorf("remembers %d builds, want %d", s.len(), tc.wantLen)
			}
			s.forget(key)
			if s.len() != 0 {
				t.Error("forget left the build")
			}
		})
	}
}
