//go:build tools

// Package tools pins containerd, the container runtime of the test bed's real
// node: the daemon and its runc shim.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
)
