// Package openshift_test runs archway's custom-builder mode as it runs on an
// OpenShift cluster whose Build capability is on: build.openshift.io is
// served by OpenShift (on the bed, by stand-in CRDs of testdata/crds) and
// OpenShift's build controller makes the Custom-strategy Build's pod (on the
// bed, the stand-in of standin_test.go, written from
// openshift-controller-manager's code). The pod runs archway's builder, which
// builds every platform with pods of its own on the bed's kwok nodes (run as
// processes by the pod runner, foreign platforms under qemu), pushes the
// index to the bed's registry and keeps the status in a MultiArchBuild.
package openshift_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/dynamic"

	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

// builderImage is the builder image the Builds' custom strategy names; the
// pod runner runs the builder binary for it.
const builderImage = "quay.io/archway/builder@sha256:0000000000000000000000000000000000000000000000000000000000000001"

var (
	theBed *bed.Bed
	runner *bed.Runner
	dyn    dynamic.Interface
	// theStandIn plays OpenShift's build controller (standin_test.go).
	theStandIn *standIn
)

func TestMain(m *testing.M) {
	var builder string
	os.Exit(framework.Run(m, framework.Options{
		Name: "openshift suite",
		Bed: bed.Options{CRDDirectoryPaths: []string{
			filepath.Join(bed.RepoRoot(), "test", "e2e", "openshift", "testdata", "crds"),
			filepath.Join(bed.RepoRoot(), "manifests", "crd", "bases", "build.archway.dev_multiarchbuilds.yaml"),
		}},
		QuietLogs: true,
		Before:    func(context.Context) error { return bed.CheckQemu() },
		Setup: func(ctx context.Context, s *framework.Suite) (func(), error) {
			theBed = s.Bed
			// custom-builder beside builder, as in the builder image.
			var err error
			builder, err = bed.GoBuild(ctx, theBed.Dir, "./cmd/builder")
			if err == nil {
				_, err = bed.GoBuild(ctx, theBed.Dir, "./cmd/custom-builder")
			}
			if err != nil {
				return nil, err
			}
			podKubeconfig, err := theBed.PodKubeconfig()
			if err != nil {
				return nil, err
			}
			if runner, err = theBed.StartPodRunner(ctx, bed.RunnerOptions{
				Images: map[string]string{"quay.io/archway/builder": builder},
				Env:    []string{"KUBECONFIG=" + podKubeconfig},
			}); err != nil {
				return nil, err
			}
			if dyn, err = dynamic.NewForConfig(theBed.Config); err != nil {
				return nil, err
			}
			// build-controller's configuration and the roles of the
			// custom pods, which read it (config_test.go).
			if err := installConfig(ctx); err != nil {
				return nil, err
			}
			standInCtx, stopStandIn := context.WithCancel(ctx)
			theStandIn = &standIn{dyn: dyn, kube: theBed.Clientset}
			go theStandIn.run(standInCtx)
			return stopStandIn, nil
		},
	}))
}
