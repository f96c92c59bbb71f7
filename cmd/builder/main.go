// Command builder runs inside every archway build pod, and on a developer's
// machine: it builds one platform of a Build with the buildah library, or
// assembles the platforms' images into a manifest list.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/archway-build/archway/pkg/version"
)

func newRootCommand() *cobra.Command {
	return &cobra.Command{
		Use:           "builder",
		Short:         "Build container images for every platform of an archway Build",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
}

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "builder:", err)
		os.Exit(1)
	}
}
