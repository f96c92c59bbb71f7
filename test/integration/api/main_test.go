//go:build !scratch

// Package api tests archway's build.openshift.io/v1 API on a real
// kube-apiserver: the CRDs install, the examples apply, every admission rule
// rejects with its message, kubectl shows the printer columns, and
// concurrent server-side apply writers of per-platform status never lose
// each other's data.
package api

import (
	"context"
	"os"
	"testing"

	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

// b is the package's bed: an apiserver with archway's CRDs, no nodes and no
// registry.
var b *bed.Bed

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Options{
		Name: "api suite",
		Bed:  bed.Options{WithoutNodes: true, WithoutRegistry: true},
		Setup: func(_ context.Context, s *framework.Suite) (func(), error) {
			b = s.Bed
			return nil, nil
		},
	}))
}
