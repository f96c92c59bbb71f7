// Package node holds the tests that run on the bed's real node: a kubelet
// with containerd 2 and runc on this machine, joined to the bed's apiserver
// beside the kwok nodes. Each case asserts on what the real runtime did
// (container states, exit reasons, user-namespace maps, image digests).
package node

import (
	"context"
	"os"
	"testing"

	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

var (
	testBed *bed.Bed
	// builderImage is the builder, built as make images builds it, on the
	// bed's busybox, in the bed's registry.
	builderImage string
)

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Options{
		Name: "node suite",
		// NODE_BED_DIR keeps the bed (logs of containerd, the kubelet...) there.
		Bed: bed.Options{RealNode: true, Dir: os.Getenv("NODE_BED_DIR"), Nodes: bed.ArchNodes(1, "arm64")},
		Setup: func(ctx context.Context, s *framework.Suite) (func(), error) {
			testBed = s.Bed
			var err error
			builderImage, _, err = testBed.PushBuilderImage(ctx, "archway/builder:node")
			return nil, err
		},
	}))
}
