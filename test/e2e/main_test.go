// Package e2e runs archway end to end on the full bed: the real
// kube-apiserver and kube-scheduler, kwok nodes of four architectures, the
// pod runner running build pods as `builder` processes (foreign platforms
// under qemu), a CNCF Distribution registry, and build-controller as a
// process of its own. The suites assert what a user would see: pods on
// nodes of their architecture, the image index in the registry and what its
// layers hold, the Build's status and events, and `kubectl logs`.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
	testframework "github.com/archway-build/archway/test/framework"
)

var (
	env *framework.Env
	// watcher is a client that can watch, for timelines.
	watcher client.WithWatch
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "archway-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	var bins framework.Binaries
	return testframework.Run(m, testframework.Options{
		Name: "e2e suite",
		Bed:  bed.Options{AuthRegistry: true},
		// The bed's envtest logs through controller-runtime; its lines
		// are noise here (every part's log is in the bed's directory).
		QuietLogs: true,
		Before: func(ctx context.Context) error {
			if err := bed.CheckQemu(); err != nil {
				return err
			}
			bins, err = framework.BuildBinaries(ctx, dir)
			return err
		},
		Setup: func(ctx context.Context, s *testframework.Suite) (func(), error) {
			if env, err = framework.StartOn(ctx, s.Bed, framework.Options{Binaries: bins}); err != nil {
				return nil, err
			}
			teardown := func() { _ = env.Stop() }
			if watcher, err = client.NewWithWatch(s.Bed.Config, client.Options{Scheme: s.Scheme}); err != nil {
				return teardown, err
			}
			return teardown, nil
		},
		AfterFailure: func() {
			fmt.Fprintf(os.Stderr, "e2e: build-controller's log ends:\n%s\n", tail(env.ControllerLog, 40))
		},
	})
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := 0
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == '\n' {
			lines++
			if lines > n {
				return string(data[i+1:])
			}
		}
	}
	return string(data)
}
