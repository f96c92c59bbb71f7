package controller

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func checkBuild(ns, name string) *buildv1.Build {
	b := &buildv1.Build{}
	b.Namespace, b.Name, b.UID = ns, name, types.UID(ns+"/"+name)
	return b
}

// blockingRun is a check that waits for its release and reports its image.
func blockingRun(release <-chan struct{}, image string) func(context.Context) []BaseCheck {
	return func(ctx context.Context) []BaseCheck {
		select {
		case <-release:
			return []BaseCheck{{Image: image}}
		case <-ctx.Done():
			return []BaseCheck{{Image: image, Err: ctx.Err()}}
		}
	}
}

// One namespace runs baseChecksPerNamespace checks at once, the rest
// queued in order; another namespace's check starts at once; each ended
// check enqueues its Build and is returned once.
func TestBaseChecksPerNamespace(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newBaseChecks(ctx)
	started := make(chan types.NamespacedName, 100)
	c.onStart = func(k types.NamespacedName) { started <- k }
	release := make(chan struct{})

	n := baseChecksPerNamespace + 2
	for i := range n {
		b := checkBuild("slow", fmt.Sprintf("b%d", i))
		if _, ok := c.result(b, blockingRun(release, b.Name)); ok {
			t.Fatalf("%s: a result before its check ran", b.Name)
		}
	}
	for i := range baseChecksPerNamespace {
		if k := <-started; k.Name != fmt.Sprintf("b%d", i) {
			t.Fatalf("started %s, want b%d", k, i)
		}
	}
	other := checkBuild("other", "fast")
	c.result(other, func(context.Context) []BaseCheck { return []BaseCheck{{Image: "fast"}} })
	if k := <-started; k.Namespace != "other" {
		t.Fatalf("started %s while namespace slow was full, want other/fast", k)
	}
	if ev := <-c.done; ev.Object.GetNamespace() != "other" {
		t.Fatalf("enqueued %s/%s, want other/fast", ev.Object.GetNamespace(), ev.Object.GetName())
	}
	if got, ok := c.result(other, nil); !ok || len(got) != 1 || got[0].Image != "fast" {
		t.Fatalf("other/fast: %v %v", got, ok)
	}
	// Taken: asked again, it is a new check.
	if _, ok := c.result(other, func(context.Context) []BaseCheck { return nil }); ok {
		t.Fatal("a result returned twice")
	}
	<-started
	<-c.done

	// A queued Build that is gone never runs.
	c.forget(types.NamespacedName{Namespace: "slow", Name: fmt.Sprintf("b%d", n-1)})
	close(release)
	seen := map[string]bool{}
	for range baseChecksPerNamespace + 1 {
		ev := <-c.done
		seen[ev.Object.GetName()] = true
	}
	for i := range n - 1 {
		if !seen[fmt.Sprintf("b%d", i)] {
			t.Errorf("b%d's check never ended (seen %v)", i, seen)
		}
	}
	if k := <-started; k.Name != fmt.Sprintf("b%d", baseChecksPerNamespace) {
		t.Errorf("started %s after the first ended, want the next queued", k)
	}
	select {
	case k := <-started:
		t.Errorf("%s started, though forgotten", k)
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.running) != 0 || len(c.queued) != 0 {
		t.Errorf("left running %v, queued %v", c.running, c.queued)
	}
}

// A Build deleted and made again under the same name gets a check of its
// own: the old check's end is not its result.
func TestBaseChecksNewUID(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newBaseChecks(ctx)
	release := make(chan struct{})
	old := checkBuild("ns", "b")
	c.result(old, blockingRun(release, "old"))
	renewed := checkBuild("ns", "b")
	renewed.UID = "new"
	c.result(renewed, blockingRun(release, "new"))
	close(release)
	<-c.done
	got, ok := c.result(renewed, nil)
	if !ok || got[0].Image != "new" {
		t.Fatalf("result %v %v, want the new Build's", got, ok)
	}
}
