// Package builder_test builds real images with the builder on the bed: real
// buildah (chroot isolation, foreign platforms under qemu), real CNCF
// Distribution registries (one open, one with htpasswd auth), a real
// apiserver for `builder docker-build` in pod mode, and the git CLI for Git
// sources; and make images' script run by a user without root, with the
// builder in a user namespace (rootless_test.go).
package builder_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"go.podman.io/buildah"

	"github.com/archway-build/archway/pkg/registry"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

// fourPlatforms are the platforms the tests build for, and what `uname -m`
// says on each.
var (
	fourPlatforms = []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
	unameOf       = map[string]string{"linux/amd64": "x86_64", "linux/arm64": "aarch64", "linux/ppc64le": "ppc64le", "linux/s390x": "s390x"}
)

var theBed *bed.Bed

func TestMain(m *testing.M) {
	// Chroot isolation re-executes this test binary for each build step.
	if buildah.InitReexec() {
		return
	}
	os.Exit(framework.Run(m, framework.Options{
		Name:   "builder suite",
		Bed:    bed.Options{WithoutNodes: true, AuthRegistry: true},
		Before: func(context.Context) error { return bed.CheckQemu() },
		Setup: func(_ context.Context, s *framework.Suite) (func(), error) {
			theBed = s.Bed
			return nil, nil
		},
	}))
}

// builderBinary builds cmd/builder once per test binary: the tests run the
// real program, as build pods and people do.
// It goes into the bed's directory, which the bed removes when it stops.
var builderBinary = sync.OnceValues(func() (string, error) {
	return bed.GoBuild(context.Background(), theBed.Dir, "./cmd/builder")
})

// runBuilder runs the builder binary with args and env (added to the
// test's environment) and returns its combined output and exit code.
func runBuilder(t testing.TB, env []string, args ...string) (string, int) {
	t.Helper()
	return runBuilderWithin(t, bed.BuildTimeout, env, args...)
}

// runBuilderWithin is runBuilder with the builder killed after timeout.
func runBuilderWithin(t testing.TB, timeout time.Duration, env []string, args ...string) (string, int) {
	t.Helper()
	out, code, _ := runBuilderMeasured(t, timeout, env, args...)
	return out, code
}

// runBuilderMeasured is runBuilderWithin that also returns the CPU time
// (user and system) of the builder and every process it waited for: its
// re-executions, the OCI runtime and the build steps.
func runBuilderMeasured(t testing.TB, timeout time.Duration, env []string, args ...string) (string, int, time.Duration) {
	t.Helper()
	bin, err := builderBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err = cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("running builder %v: %v\n%s", args, err, out.String())
	}
	return out.String(), code, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// writeContext writes a build context with the given Dockerfile.
func writeContext(t testing.TB, dockerfile string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func digestOf(s string) digest.Digest { return digest.Digest(s) }

// noAuth is no registry credentials: containers/image looks in its default
// places (there are none on the bed's machines).
var noAuth = registry.AuthFile{}
