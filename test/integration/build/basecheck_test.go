package build

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	buildcontroller "github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/pkg/platform"
)

// hangingRegistry stands for base images' registries: inspections of
// images on host silent never answer (they end only when the controller
// gives up on them), others answer at once with the four platforms.
type hangingRegistry struct {
	mu        sync.Mutex
	hanging   int // inspections of silent images waiting now
	abandoned int // inspections of silent images the controller gave up
	changed   chan struct{}
}

const silentRegistry = "silent.registry.example"

func newHangingRegistry() *hangingRegistry {
	return &hangingRegistry{changed: make(chan struct{}, 100)}
}

func (r *hangingRegistry) BasePlatforms(ctx context.Context, ref, _ string, _ []byte) ([]platform.Platform, error) {
	if len(ref) < len(silentRegistry) || ref[:len(silentRegistry)] != silentRegistry {
		var ps []platform.Platform
		for _, p := range fourPlatforms {
			parsed, err := platform.Parse(p)
			if err != nil {
				return nil, err
			}
			ps = append(ps, parsed)
		}
		return ps, nil
	}
	r.note(func() { r.hanging++ })
	<-ctx.Done()
	r.note(func() { r.hanging--; r.abandoned++ })
	return nil, ctx.Err()
}

func (r *hangingRegistry) note(f func()) {
	r.mu.Lock()
	f()
	r.mu.Unlock()
	r.changed <- struct{}{}
}

func (r *hangingRegistry) counts() (hanging, abandoned int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hanging, r.abandoned
}

// A Build whose base image's registry never answers holds none of the
// controller's workers: with as many such Builds as workers, each checking
// its base, another Build's base is checked and its pods made while every
// silent inspection still waits. (Were the inspections run on the workers,
// the other Build would wait until one of them gave up, 15 s later.)
func TestSilentBaseRegistryHoldsNoWorker(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "silentbase")
	reg := newHangingRegistry()
	const workers = 2
	startControllerOptions(t, h.ns, testConfig(nil), nil, buildcontroller.Options{Workers: workers, BaseInspector: reg})

	for i := range workers {
		b := h.buildObj(fmt.Sprintf("silent-%d", i), amd64, arm64)
		b.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{From: &corev1.ObjectReference{Kind: "DockerImage", Name: silentRegistry + "/base:v1"}}
		h.create(b)
	}
	// Every silent Build's inspection has begun.
	for {
		if hanging, _ := reg.counts(); hanging == workers {
			break
		}
		select {
		case <-reg.changed:
		case <-h.ctx.Done():
			t.Fatalf("the silent Builds' inspections did not begin: %v", h.ctx.Err())
		}
	}

	b := h.buildObj("app", amd64, arm64)
	b.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{From: &corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/base:v1"}}
	h.create(b)
	wantPlatformPods(amd64, arm64).do(h)

	if hanging, abandoned := reg.counts(); hanging != workers || abandoned != 0 {
		t.Errorf("when the other Build had its pods, %d silent inspections waited and %d had been given up; want %d and 0",
			hanging, abandoned, workers)
	}
}
