// Package version holds the version the Makefile stamps into archway's binaries.
package version

// Version is set at link time with -ldflags "-X .../pkg/version.Version=...".
// It stays "dev" for plain go build and go test.
var Version = "dev"
