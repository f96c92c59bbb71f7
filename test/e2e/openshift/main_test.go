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
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/dynamic"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/archway-build/archway/test/bed"
)

// builderImage is the builder image the Builds' custom strategy names; the
// pod runner runs the builder binary for it.
const builderImage = "quay.io/archway/builder@sha256:0000000000000000000000000000000000000000000000000000000000000001"

var (
	theBed *bed.Bed
	runner *bed.Runner
	dyn    dynamic.Interface
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	logf.SetLogger(logr.Discard())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := bed.CheckQemu(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "archway-openshift-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// custom-builder beside builder, as in the builder image.
	builder, err := bed.GoBuild(ctx, dir, "./cmd/builder")
	if err == nil {
		_, err = bed.GoBuild(ctx, dir, "./cmd/custom-builder")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	root := bed.RepoRoot()
	theBed, err = bed.Start(ctx, bed.Options{CRDDirectoryPaths: []string{
		filepath.Join(root, "test", "e2e", "openshift", "testdata", "crds"),
		filepath.Join(root, "manifests", "crd", "bases", "build.archway.dev_multiarchbuilds.yaml"),
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer theBed.Stop()
	// The pods reach the apiserver with the bed's kubeconfig (the runner
	// has no in-cluster network); pods in user namespaces read it as no
	// one on the host.
	kubeconfig, err := os.ReadFile(theBed.Kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	podKubeconfig := theBed.Kubeconfig + "-pods"
	if err := os.WriteFile(podKubeconfig, kubeconfig, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := bed.SearchableByOthers(filepath.Dir(podKubeconfig)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if runner, err = theBed.StartPodRunner(ctx, bed.RunnerOptions{
		Images: map[string]string{"quay.io/archway/builder": builder},
		Env:    []string{"KUBECONFIG=" + podKubeconfig},
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if dyn, err = dynamic.NewForConfig(theBed.Config); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	standInCtx, stopStandIn := context.WithCancel(context.Background())
	defer stopStandIn()
	go (&standIn{dyn: dyn, kube: theBed.Clientset}).run(standInCtx)
	return m.Run()
}
