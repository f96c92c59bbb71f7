package main

import (
	"context"
	"flag"
	"path/filepath"
	"testing"

	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

// TestDemoInstalled runs `make demo INSTALL=1` (the demo with --install):
// a bed with no archway, archway installed with kubectl apply -k, every
// component a pod, then the demo's BuildConfig built for four platforms
// with the plugin's start-build. It fails when the build does not
// complete.
func TestDemoInstalled(t *testing.T) {
	if testing.Short() {
		t.Skip("installs every component and builds for four platforms")
	}
	ctx, cancel := context.WithTimeout(t.Context(), bed.BuildTimeout)
	defer cancel()
	dir := t.TempDir()
	if _, err := framework.BuildBinaries(ctx, dir); err != nil {
		t.Fatal(err)
	}
	// make demo's flags: defined where main defines them (a clash with
	// another package's flag panics), parsed from make demo INSTALL=1's.
	defineFlags(flag.CommandLine)
	o := parse(t, "--bin-dir", dir, "--install")
	if err := run(ctx, o); err != nil {
		t.Fatal(err)
	}
}

// TestDemoOnCluster runs `make demo KUBECONFIG=...` (the demo with
// --cluster) twice against a cluster where archway is installed (the bed,
// installed as TestInstall does): it starts nothing, and each run creates
// a BuildConfig of its own and builds it for four platforms.
func TestDemoOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("installs every component and builds for four platforms")
	}
	ctx, cancel := context.WithTimeout(t.Context(), bed.BuildTimeout)
	defer cancel()
	bins, err := framework.BuildBinaries(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ib, err := framework.StartInstallBed(ctx, bins, t.TempDir(), bed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ib.Bed.Stop() })
	overlay, err := ib.WriteOverlay(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := ib.Install(ctx, overlay); err != nil {
		t.Fatal(err)
	}
	files, err := readDir(filepath.Join(bed.RepoRoot(), "examples", "demo"))
	if err != nil {
		t.Fatal(err)
	}
	uri, err := framework.GitRepo(filepath.Join(t.TempDir(), "repo"), files)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		o := parse(t, "--cluster", ib.Bed.Kubeconfig, "--git-uri", uri, "--context-dir", "app",
			"--registry", ib.Bed.Registry.Host, "--base-image", ib.Bed.BaseImage, "--namespace", "default")
		if err := run(ctx, o); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
}

// parse parses the demo's flags from args.
func parse(t *testing.T, args ...string) options {
	t.Helper()
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	o := defineFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return *o
}
