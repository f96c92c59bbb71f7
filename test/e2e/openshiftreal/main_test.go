// Package openshiftreal_test runs archway's custom-builder mode under
// OpenShift's own parts, built from the Go module proxy by hack/openshift.sh:
// openshift-apiserver serves build.openshift.io and image.openshift.io
// beside the bed's apiserver (every subresource: instantiate, log, ...),
// openshift-controller-manager's build controller makes each
// Custom-strategy Build's pod and moves its phase, and the tests drive
// them with the real oc, as a user of such a cluster does. The custom pod
// runs archway's builder, which builds every platform with pods of its own
// on the bed's kwok nodes (run as processes by the pod runner, foreign
// platforms under qemu) and pushes the index to the bed's registry.
//
// The three programs take about 25 minutes of both cores to build cold,
// more than CI's budget: `make test-openshift` builds them and runs the
// suite; without them (their paths in ARCHWAY_OPENSHIFT_APISERVER,
// ARCHWAY_OPENSHIFT_CONTROLLER_MANAGER and ARCHWAY_OC) every test skips,
// and CI proves the same behaviour against test/e2e/openshift's stand-in.
package openshiftreal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/archway-build/archway/pkg/build/custombuilds"
	"github.com/archway-build/archway/test/bed"
	e2e "github.com/archway-build/archway/test/e2e/framework"
	"github.com/archway-build/archway/test/framework"
)

// OCEnv names an oc binary (hack/openshift.sh builds one).
const OCEnv = "ARCHWAY_OC"

// builderImage is the builder image the BuildConfigs' custom strategy
// names; the pod runner runs the builder binary for it.
const builderImage = "quay.io/archway/builder@sha256:0000000000000000000000000000000000000000000000000000000000000001"

var (
	theBed *bed.Bed
	runner *bed.Runner
	dyn    dynamic.Interface
	// ocBinary is the real oc.
	ocBinary string
	// buildController is build-controller, built for the suite.
	buildController string
	// ocmLog is openshift-controller-manager's log.
	ocmLog string
	// missing names the programs not given, when the suite skips.
	missing []string
)

func TestMain(m *testing.M) {
	bins := map[string]string{}
	for _, env := range []string{bed.OpenShiftAPIServerEnv, bed.OpenShiftControllerManagerEnv, OCEnv} {
		if bins[env] = os.Getenv(env); bins[env] == "" {
			missing = append(missing, "$"+env)
		}
	}
	if len(missing) > 0 {
		os.Exit(m.Run())
	}
	ocBinary = bins[OCEnv]
	os.Exit(framework.Run(m, framework.Options{
		Name: "openshiftreal suite",
		Bed: bed.Options{CRDDirectoryPaths: []string{
			filepath.Join(bed.RepoRoot(), "manifests", "crd", "bases", "build.archway.dev_multiarchbuilds.yaml"),
		}},
		QuietLogs: true,
		Before:    func(context.Context) error { return bed.CheckQemu() },
		Setup: func(ctx context.Context, s *framework.Suite) (func(), error) {
			theBed = s.Bed
			// custom-builder beside builder, as in the builder image.
			builder, err := bed.GoBuild(ctx, theBed.Dir, "./cmd/builder")
			if err == nil {
				_, err = bed.GoBuild(ctx, theBed.Dir, "./cmd/custom-builder")
			}
			if err == nil {
				buildController, err = bed.GoBuild(ctx, theBed.Dir, "./cmd/build-controller")
			}
			if err != nil {
				return nil, err
			}
			if _, err := theBed.StartOpenShiftAPIServer(ctx, bins[bed.OpenShiftAPIServerEnv]); err != nil {
				return nil, fmt.Errorf("openshift-apiserver: %w", err)
			}
			if ocmLog, err = theBed.StartOpenShiftControllerManager(ctx, bins[bed.OpenShiftControllerManagerEnv]); err != nil {
				return nil, fmt.Errorf("openshift-controller-manager: %w", err)
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
			if _, err := e2e.InstallCustomBuilderConfig(ctx, theBed.Client); err != nil {
				return nil, err
			}
			// The protection of manifests/openshift-builds for every test:
			// its ConfigMap naming archway's builder image, and
			// build-controller's custom-builds-webhook, which
			// openshift-apiserver calls for every Build and BuildConfig.
			if err := theBed.Client.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "archway-system", Name: custombuilds.ConfigMapName},
				Data:       map[string]string{custombuilds.ImageKey: builderImage},
			}); err != nil {
				return nil, err
			}
			if err := theBed.StartCustomBuildsWebhook(ctx, buildController); err != nil {
				return nil, err
			}
			return func() {}, nil
		},
		AfterFailure: func() {
			if ocmLog != "" {
				data, _ := os.ReadFile(ocmLog)
				lines := strings.Split(string(data), "\n")
				if len(lines) > 40 {
					lines = lines[len(lines)-40:]
				}
				fmt.Fprintf(os.Stderr, "openshift-controller-manager's log ends:\n%s\n", strings.Join(lines, "\n"))
			}
		},
	}))
}

// requireOpenShift skips t when the suite runs without OpenShift's
// programs.
func requireOpenShift(t *testing.T) {
	t.Helper()
	if len(missing) > 0 {
		t.Skipf("%s name no programs (`make test-openshift` builds them with hack/openshift.sh)", strings.Join(missing, ", "))
	}
}
