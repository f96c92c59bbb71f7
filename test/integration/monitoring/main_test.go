package monitoring

import (
	"context"
	"os"
	"testing"

	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

// What every case shares: the bed and build-controller's binary, which
// runs each component of manifests/default as a process.
var (
	theBed        *bed.Bed
	controllerBin string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "archway-monitoring-")
	if err != nil {
		panic(err)
	}
	code := framework.Run(m, framework.Options{
		Name: "monitoring suite",
		// kube-controller-manager: the placement operator waits for the
		// Deployments it scales to 0 to report it.
		Bed: bed.Options{ControllerManager: true},
		Before: func(ctx context.Context) error {
			controllerBin, err = bed.GoBuild(ctx, dir, "./cmd/build-controller")
			return err
		},
		Setup: func(_ context.Context, s *framework.Suite) (func(), error) {
			theBed = s.Bed
			return nil, nil
		},
	})
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
