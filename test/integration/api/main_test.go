//go:build !scratch

// Package api tests archway's build.openshift.io/v1 API on a real
// kube-apiserver: the CRDs install, the examples apply, every admission rule
// rejects with its message, kubectl shows the printer columns, and
// concurrent server-side apply writers of per-platform status never lose
// each other's data.
package api

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/archway-build/archway/test/bed"
)

// b is the package's bed: an apiserver with archway's CRDs, no nodes and no
// registry.
var b *bed.Bed

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	b, err = bed.Start(context.Background(), bed.Options{WithoutNodes: true, WithoutRegistry: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := b.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the bed:", err)
	}
	return code
}
