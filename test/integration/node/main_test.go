// Package node holds the tests that run on the bed's real node: a kubelet
// with containerd 2 and runc on this machine, joined to the bed's apiserver
// beside the kwok nodes. Each case asserts on what the real runtime did
// (container states, exit reasons, user-namespace maps, image digests).
package node

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/archway-build/archway/test/bed"
)

var (
	testBed *bed.Bed
	// builderImage is the builder, built as make images builds it, on the
	// bed's busybox, in the bed's registry.
	builderImage string
)

func TestMain(m *testing.M) {
	bed.SetTestLogger()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	// NODE_BED_DIR keeps the bed (logs of containerd, the kubelet...) there.
	b, err := bed.Start(ctx, bed.Options{RealNode: true, Dir: os.Getenv("NODE_BED_DIR"), Nodes: bed.ArchNodes(1, "arm64")})
	if err == nil {
		builderImage, _, err = b.PushBuilderImage(ctx, "archway/builder:node")
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if b != nil {
			_ = b.Stop()
		}
		os.Exit(1)
	}
	testBed = b
	code := m.Run()
	if err := b.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the bed:", err)
	}
	os.Exit(code)
}
