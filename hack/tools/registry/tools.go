//go:build tools

// Package tools pins github.com/distribution/distribution/v3 for the test bed and the Makefile.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
