//go:build tools

// Package tools pins github.com/moby/buildkit for the builder benchmark, which
// runs buildkitd and buildctl beside archway's builder.
package tools

import (
	_ "github.com/moby/buildkit/cmd/buildctl"
	_ "github.com/moby/buildkit/cmd/buildkitd"
)
