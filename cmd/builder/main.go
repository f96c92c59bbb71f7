// Command builder runs inside every archway build pod, and on a developer's
// machine: it builds one platform of a Build with the buildah library, or
// assembles the platforms' images into a manifest list.
//
//	builder docker-build     in a platform's build pod (reads $BUILD)
//	builder manifest-list    in a build's last pod (reads $BUILD)
//	builder build            on a machine, without a cluster: every platform, then the list
//	builder prune-cache      on a machine: removes old entries of build --cache-repo's caches
//	builder                  with $BUILD set: OpenShift's Custom-strategy builder (runs custom-builder)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"go.podman.io/buildah"

	"github.com/archway-build/archway/pkg/version"
)

func newRootCommand() *cobra.Command {
	var logLevel, cpuProfile string
	var stopProfile func()
	cmd := &cobra.Command{
		Use:           "builder",
		Short:         "Build container images for every platform of an archway Build",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			// buildah and containers/image log through logrus; their
			// warnings belong on stderr, next to the build's own output.
			level, err := logrus.ParseLevel(logLevel)
			if err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			logrus.SetLevel(level)
			logrus.SetOutput(os.Stderr)
			logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: "15:04:05.000"})
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				stopProfile = func() { pprof.StopCPUProfile(); _ = f.Close() }
			}
			return nil
		},
		PersistentPostRun: func(*cobra.Command, []string) {
			if stopProfile != nil {
				stopProfile()
			}
		},
	}
	cmd.PersistentFlags().StringVar(&logLevel, "log-level", "warn", "level of buildah's and containers/image's own log lines (debug, info, warn, error)")
	cmd.PersistentFlags().StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of the builder process (not of build steps) to this file")
	_ = cmd.PersistentFlags().MarkHidden("cpu-profile")
	cmd.AddCommand(newDockerBuildCommand(), newBuildCommand(), newManifestListCommand(), newPruneCacheCommand())
	cmd.RunE = runDefault
	return cmd
}

func main() {
	// Chroot isolation runs build steps by re-executing this program:
	// in the re-executed child this runs the step and reports true.
	if buildah.InitReexec() {
		return
	}
	// A closed output pipe (builder build ... | head) stops the build like
	// a signal does, rather than killing the process with layers mounted.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGPIPE)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "builder:", err)
		os.Exit(1)
	}
}
