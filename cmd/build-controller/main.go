// Command build-controller hosts archway's controllers and webhooks. Which
// of them run in a process is chosen by flags, so they can be deployed and
// scaled apart from one binary.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/archway-build/archway/pkg/version"
)

func newRootCommand() *cobra.Command {
	return &cobra.Command{
		Use:           "build-controller",
		Short:         "Run archway's controllers and webhooks",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
}

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "build-controller:", err)
		os.Exit(1)
	}
}
