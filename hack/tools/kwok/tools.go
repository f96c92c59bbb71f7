//go:build tools

// Package tools pins sigs.k8s.io/kwok for the test bed and the Makefile.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
