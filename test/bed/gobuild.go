package bed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
)

// BuildTags are the build tags archway's binaries are built with (the
// Makefile's BUILD_TAGS): buildah without extra C libraries, Go's own
// resolver and user lookups.
const BuildTags = "containers_image_openpgp exclude_graphdriver_btrfs netgo osusergo libsqlite3"

// GoBuild builds the repository's package pkg (e.g. "./cmd/builder") into
// dir with BuildTags and returns the binary's path, so that a test runs the
// real program as pods and people do. Go's build cache makes a second
// build of an unchanged package take a few seconds.
func GoBuild(ctx context.Context, dir, pkg string) (string, error) {
	out := filepath.Join(dir, path.Base(pkg))
	// Without the symbol table and DWARF (-s -w), as the Makefile builds:
	// chroot isolation copies the builder's binary into memory twice per
	// RUN step, and that is a third less to copy.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", BuildTags, "-ldflags", "-s -w", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, msg)
	}
	return out, nil
}
