package main

import (
	"strings"
	"testing"

	"github.com/archway-build/archway/pkg/build/controller"
)

// TestRemoveTagsFlag: the flag build-controller starts the pod that removes
// the per-platform tags with is the one `builder manifest-list` reads.
func TestRemoveTagsFlag(t *testing.T) {
	cmd := newManifestListCommand()
	if err := cmd.ParseFlags([]string{controller.RemoveTagsArg, "--wait-timeout=600s"}); err != nil {
		t.Fatalf("parsing %s: %v", controller.RemoveTagsArg, err)
	}
	if f := cmd.Flags().Lookup(strings.TrimPrefix(controller.RemoveTagsArg, "--")); f == nil || f.Value.String() != "true" {
		t.Errorf("flag %s not set: %v", controller.RemoveTagsArg, f)
	}
}
