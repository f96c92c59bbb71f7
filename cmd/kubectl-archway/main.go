// Command kubectl-archway is the kubectl (and oc) plugin of archway: on the
// PATH, `kubectl archway start-build`, `logs`, `describe build` and
// `cancel-build` work with archway's Builds and BuildConfigs.
//
//	go install github.com/archway-build/archway/cmd/kubectl-archway@latest
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/archway-build/archway/pkg/build/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
