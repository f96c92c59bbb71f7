//go:build tools

// Package tools pins runc, the OCI runtime the test bed's real node runs
// containers with.
package tools

import (
	_ "github.com/opencontainers/runc"
)
