package registries

import (
	"testing"
)

// TestStoreUpdate: the subscribers (the inspector's purge) run on every
// change and before the first Settings are ready, and the same
// configuration applied again is no change: no new generation, no purge.
func TestStoreUpdate(t *testing.T) {
	store := NewStore(t.TempDir())
	var calls []uint64
	store.Subscribe(func(set *Settings) {
		select {
		case <-store.ready:
			if set.Generation == 1 {
				t.Error("the first Settings were ready before the subscribers ran: an inspection could begin and be purged")
			}
		default:
		}
		calls = append(calls, set.Generation)
	})
	build := func(insecure ...string) *Generated {
		gen, err := Build(Inputs{InsecureRegistries: insecure})
		if err != nil {
			t.Fatal(err)
		}
		return gen
	}
	first, err := store.Update(build("a.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := store.Update(build("a.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if again != first || again.Generation != 1 {
		t.Errorf("the same configuration again made generation %d, want the current one (1) kept", again.Generation)
	}
	changed, err := store.Update(build("a.example.com", "b.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if changed.Generation != 2 {
		t.Errorf("a changed configuration made generation %d, want 2", changed.Generation)
	}
	if len(calls) != 2 || calls[0] != 1 || calls[1] != 2 {
		t.Errorf("subscribers called for generations %v, want [1 2]", calls)
	}
}
