package podcontroller

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/archway-build/archway/pkg/placement/image"
	"github.com/archway-build/archway/pkg/placement/registries"
)

// heldRegistry answers every inspection with one platform once released,
// and counts the calls.
type heldRegistry struct {
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (r *heldRegistry) Architectures(ctx context.Context, _ image.Reference, _ image.Auth) (image.Platforms, digest.Digest, error) {
	r.calls.Add(1)
	r.entered <- struct{}{}
	<-r.release
	return image.PlatformFromConfig("linux", "arm64"), digest.FromString("index"), nil
}

func (r *heldRegistry) Digest(context.Context, string, image.Auth) (digest.Digest, error) {
	return digest.FromString("index"), nil
}

// TestPurgeOnChange: an inspection under way when the first registry
// configuration is made keeps its answer in the cache (the first
// configuration forgets nothing); a changed configuration forgets it.
func TestPurgeOnChange(t *testing.T) {
	ctx := context.Background()
	reg := &heldRegistry{entered: make(chan struct{}, 4), release: make(chan struct{})}
	cache := image.NewCache(reg, image.CacheOptions{})
	store := registries.NewStore(t.TempDir())
	store.Subscribe(purgeOnChange(cache))
	update := func(host string) {
		t.Helper()
		gen, err := registries.Build(registries.Inputs{InsecureRegistries: []string{host}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Update(gen); err != nil {
			t.Fatal(err)
		}
	}
	ref := image.Reference{Name: "registry.example/app:1"}
	inspect := func() {
		t.Helper()
		if _, _, err := cache.Architectures(ctx, ref, nil); err != nil {
			t.Fatal(err)
		}
	}

	// A pod's inspection begins before the first configuration exists
	// (a controller that just started) and ends after it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = cache.Architectures(ctx, ref, nil)
	}()
	<-reg.entered
	update("first.example")
	close(reg.release)
	<-done
	inspect()
	if got := reg.calls.Load(); got != 1 {
		t.Errorf("registry calls for one image inspected across the first configuration: %d, want 1 (its answer cached)", got)
	}

	update("second.example")
	inspect()
	if got := reg.calls.Load(); got != 2 {
		t.Errorf("registry calls after the configuration changed: %d, want 2 (the cache forgot)", got)
	}
}
