package main

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/archway-build/archway/test/e2e/framework"
)

// TestDemoInstalled runs `make demo INSTALL=1` (the demo with --install):
// a bed with no archway, archway installed with kubectl apply -k, every
// component a pod, then the demo's BuildConfig built for four platforms
// with the plugin's start-build, through the same function that builds on
// a cluster given by --cluster. It fails when the build does not
// complete.
func TestDemoInstalled(t *testing.T) {
	if testing.Short() {
		t.Skip("installs every component and builds for four platforms")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if _, err := framework.BuildBinaries(ctx, dir); err != nil {
		t.Fatal(err)
	}
	// make demo's flags: defined where main defines them (a clash with
	// another package's flag panics), parsed from make demo INSTALL=1's.
	defineFlags(flag.CommandLine)
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	o := defineFlags(fs)
	if err := fs.Parse([]string{"--bin-dir", dir, "--install"}); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, *o); err != nil {
		t.Fatal(err)
	}
}
