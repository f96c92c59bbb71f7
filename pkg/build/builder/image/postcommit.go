package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"go.podman.io/buildah"
	"go.podman.io/buildah/define"

	"github.com/archway-build/archway/pkg/registry"
)

// PostCommit is a command run in a container of the built image before the
// image is pushed (OpenShift's post-commit hook): a failure stops the build
// and nothing is pushed.
type PostCommit struct {
	// Command replaces the image's entrypoint; nil runs the image's
	// entrypoint with Args.
	Command []string
	// Args follow the command (or the entrypoint).
	Args []string
}

// argv is the hook's command line in an image whose entrypoint is
// entrypoint.
func (h PostCommit) argv(entrypoint []string) []string {
	if h.Command != nil {
		return append(append([]string{}, h.Command...), h.Args...)
	}
	return append(append([]string{}, entrypoint...), h.Args...)
}

// PostCommitError says that the post-commit hook failed.
type PostCommitError struct {
	// Command is the command line run.
	Command []string
	Err     error
}

func (e *PostCommitError) Error() string {
	return fmt.Sprintf("the post-commit hook %q failed: %v", strings.Join(e.Command, " "), e.Err)
}

func (e *PostCommitError) Unwrap() error { return e.Err }

// runPostCommit runs the hook in a new container of the image imageID of
// the store, as the image's user, in its working directory and with its
// environment (and env), under the isolation RUN steps have; a foreign
// platform's image runs under the emulation its RUN steps ran under. The
// container is deleted afterwards, and nothing it writes reaches the image.
func (b *Builder) runPostCommit(ctx context.Context, imageID string, hook PostCommit, env []string, out io.Writer) (time.Duration, error) {
	start := time.Now()
	if out == nil {
		out = io.Discard
	}
	sys, err := b.systemContext(nil, registry.AuthFile{})
	if err != nil {
		return 0, err
	}
	ulimits, err := hardLimitUlimits()
	if err != nil {
		return 0, err
	}
	isolation := define.IsolationChroot
	if b.cfg.Isolation == IsolationOCI {
		isolation = define.IsolationOCI
	}
	hostNet := define.NamespaceOptions{{Name: string(specs.NetworkNamespace), Host: true}}
	ctr, err := buildah.NewBuilder(ctx, b.store, buildah.BuilderOptions{
		FromImage: imageID, PullPolicy: define.PullNever, SignaturePolicyPath: b.policyPath,
		SystemContext: sys, Isolation: isolation, CommonBuildOpts: &define.CommonBuildOptions{Ulimit: ulimits},
		NamespaceOptions: hostNet, NetworkInterface: hostNetwork{},
	})
	if err != nil {
		return 0, fmt.Errorf("a container of the built image for the post-commit hook: %w", err)
	}
	defer func() { _ = ctr.Delete() }()
	argv := hook.argv(ctr.Entrypoint())
	if len(argv) == 0 {
		return 0, &PostCommitError{Err: errors.New("the image has no entrypoint to run the hook's args with: set command or script")}
	}
	_, _ = fmt.Fprintf(out, "Running the post-commit hook: %s\n", strings.Join(argv, " "))
	err = ctr.Run(argv, buildah.RunOptions{
		Isolation: isolation, Runtime: b.cfg.OCIRuntime, Env: env,
		Stdout: out, Stderr: out, Terminal: buildah.WithoutTerminal,
		NamespaceOptions: hostNet, SystemContext: sys,
	})
	if ctx.Err() != nil {
		return time.Since(start), ctx.Err()
	}
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			err = fmt.Errorf("exit status %d", exit.ExitCode())
		}
		return time.Since(start), &PostCommitError{Command: argv, Err: err}
	}
	_, _ = fmt.Fprintf(out, "The post-commit hook succeeded\n")
	return time.Since(start), nil
}
