package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

func TestBadConfigFailsStartUpNamingTheField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	data := "apiVersion: config.archway.dev/v1alpha1\nkind: BuildControllerConfiguration\nbuild:\n  builderImage: example.com/builder:1\n  buildOverrides:\n    platforms: [linux/x86_64]\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newRootCommand()
	cmd.SetArgs([]string{"--config=" + path, "--controllers=build"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "build.buildOverrides.platforms[0]") || !strings.Contains(err.Error(), `use "amd64"`) {
		t.Fatalf("start-up error = %v, want one naming build.buildOverrides.platforms[0]", err)
	}
}

func TestBuildComponentNeedsABuilderImage(t *testing.T) {
	opts := &options{}
	cfg, err := loadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	opts.config = cfg
	if err := setupBuild(nil, opts); err == nil || !strings.Contains(err.Error(), "build.builderImage") {
		t.Fatalf("setupBuild without a builder image: %v", err)
	}
}

func TestSchemeHoldsBuilds(t *testing.T) {
	gvks, _, err := newScheme().ObjectKinds(&buildv1.Build{})
	if err != nil || len(gvks) == 0 {
		t.Fatalf("Build not in the scheme: %v", err)
	}
}
