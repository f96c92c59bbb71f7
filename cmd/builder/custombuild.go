package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// customBuilder is the program that runs a Custom-strategy Build, beside
// this one in the builder image.
const customBuilder = "custom-builder"

// runDefault is the builder with no command. OpenShift's build controller
// starts a Custom-strategy Build's image so, with the Build in $BUILD: the
// builder then becomes custom-builder (cmd/custom-builder), which lies
// beside it. Without $BUILD it prints the help.
func runDefault(cmd *cobra.Command, _ []string) error {
	if os.Getenv(buildv1.BuildEnv) == "" {
		return cmd.Help()
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	path := filepath.Join(filepath.Dir(self), customBuilder)
	if err := syscall.Exec(path, []string{path}, os.Environ()); err != nil {
		return fmt.Errorf("$%s is set, so this is a Custom-strategy build: running %s: %w", buildv1.BuildEnv, path, err)
	}
	return nil
}
