package openshiftreal_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/archway-build/archway/pkg/build/custombuilds"
	"github.com/archway-build/archway/pkg/build/plugin"
	"github.com/archway-build/archway/test/bed"
)

// customBuildConfig is buildConfig's BuildConfig with the builder image
// and the Docker socket given.
func customBuildConfig(name, image string, exposeDockerSocket bool) string {
	bc := strings.Replace(buildConfig(name, "FROM scratch\n", "example.com/none:latest"), builderImage, image, 1)
	if exposeDockerSocket {
		bc = strings.Replace(bc, "    customStrategy:\n", "    customStrategy:\n      exposeDockerSocket: true\n", 1)
	}
	return bc
}

// setCustomBuilderImages sets the images the ConfigMap admits and waits
// until openshift-apiserver's calls see them: a dry-run Build of
// probe is admitted (want true) or refused.
func setCustomBuilderImages(t *testing.T, ctx context.Context, ns, images, probe string, want bool) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := theBed.Client.Get(ctx, client.ObjectKey{Namespace: "archway-system", Name: custombuilds.ConfigMapName}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{custombuilds.ImageKey: images}
	if err := theBed.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	b := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "build.openshift.io/v1", "kind": "Build",
		"metadata": map[string]any{"generateName": "probe-", "namespace": ns},
		"spec": map[string]any{
			"source":   map[string]any{"type": "Dockerfile", "dockerfile": "FROM scratch\n"},
			"strategy": map[string]any{"type": "Custom", "customStrategy": map[string]any{"from": map[string]any{"kind": "DockerImage", "name": probe}}},
		},
	}}
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(buildsResource).Namespace(ns).Create(ctx, b, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if want {
			return err == nil, nil
		}
		return err != nil && strings.Contains(err.Error(), "not DockerImage "+probe), nil
	}); err != nil {
		t.Fatalf("waiting for the webhook to see ConfigMap images %s: %v", images, err)
	}
}

// TestCustomBuildsWebhookOnOpenShift: openshift-apiserver, which evaluates
// no ValidatingAdmissionPolicy, calls build-controller's
// custom-builds-webhook (running for the whole suite, as
// manifests/openshift-builds runs it): `oc create` of a Custom-strategy
// BuildConfig of another builder image, or exposing the Docker socket, is
// refused with the webhook's message, while a Docker-strategy one and
// archway's are created. The Builds openshift-apiserver itself creates
// (oc start-build) are judged too: once the ConfigMap stops naming a
// BuildConfig's image, starting it is refused, while relabelling it is
// not.
func TestCustomBuildsWebhookOnOpenShift(t *testing.T) {
	requireOpenShift(t)
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	defer cancel()
	ns := newProject(t, ctx)
	for _, tc := range []struct {
		name, bc, refuse string
	}{
		{"another builder image", customBuildConfig("evil", "quay.io/evil/builder:1", false),
			"may run only archway's builder image, by digest (" + builderImage + "), not DockerImage quay.io/evil/builder:1"},
		{"the Docker socket", customBuildConfig("socket", builderImage, true), "exposeDockerSocket is refused"},
		{"archway's builder image", customBuildConfig("archway", builderImage, false), ""},
		{"the Docker strategy", "apiVersion: build.openshift.io/v1\nkind: BuildConfig\nmetadata: {name: docker}\n" +
			"spec: {source: {dockerfile: \"FROM scratch\"}, strategy: {dockerStrategy: {}}}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := oc(ctx, tc.bc, "create", "-n", ns, "-f", "-")
			switch {
			case tc.refuse == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refuse != "" && err == nil:
				t.Errorf("created, want refused with %q", tc.refuse)
			case tc.refuse != "" && !strings.Contains(err.Error(), tc.refuse):
				t.Errorf("refused with %v, want %q", err, tc.refuse)
			}
		})
	}

	// OpenShift appends start-build's -e to the strategy's env, which it
	// appends to the custom pod's own: a BUILD there would replace the
	// Build the custom builder reads.
	t.Run("starting a build that replaces BUILD", func(t *testing.T) {
		_, err := oc(ctx, "", "start-build", "archway", "-n", ns, "-e", `BUILD={"spec":{}}`)
		if err == nil || !strings.Contains(err.Error(), "spec.strategy.customStrategy.env: BUILD would replace what OpenShift sets") {
			t.Errorf("oc start-build -e BUILD=...: %v, want refused by the webhook", err)
		}
	})

	// A BuildConfig of a second image, admitted while the ConfigMap names
	// it, then no longer named.
	other := "quay.io/archway/builder@sha256:" + strings.Repeat("2", 64)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), bed.LongTimeout)
		defer cancel()
		setCustomBuilderImages(t, ctx, ns, builderImage, builderImage, true)
	})
	setCustomBuilderImages(t, ctx, ns, builderImage+","+other, other, true)
	if _, err := oc(ctx, customBuildConfig("previous", other, false), "create", "-n", ns, "-f", "-"); err != nil {
		t.Fatal(err)
	}
	setCustomBuilderImages(t, ctx, ns, builderImage, other, false)
	t.Run("starting a BuildConfig of an image no longer admitted", func(t *testing.T) {
		_, err := oc(ctx, "", "start-build", "previous", "-n", ns)
		if err == nil || !strings.Contains(err.Error(), "may run only archway's builder image, by digest ("+builderImage+"), not DockerImage "+other) {
			t.Errorf("oc start-build: %v, want refused by the webhook", err)
		}
	})
	t.Run("relabelling it", func(t *testing.T) {
		if _, err := oc(ctx, "", "label", "-n", ns, "bc/previous", "team=a"); err != nil {
			t.Errorf("refused: %v", err)
		}
	})
}

// TestBuildControllerRefusesOpenShiftBuilds: build-controller's build
// components, started where openshift-apiserver serves
// build.openshift.io, exit at once, naming the custom-builder mode, as
// discovery shows them OpenShift's API; the custom-builds-webhook
// component of the same binary serves the suite.
func TestBuildControllerRefusesOpenShiftBuilds(t *testing.T) {
	requireOpenShift(t)
	for _, component := range []string{"build", "buildconfig", "buildconfig-webhooks"} {
		t.Run(component, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
			defer cancel()
			// The configuration file of the install, which sets the
			// builder image the build component needs.
			cmd := exec.CommandContext(ctx, buildController, "--controllers="+component, "--leader-elect=false",
				"--config="+filepath.Join(bed.RepoRoot(), "manifests", "base", "config.yaml"),
				"--metrics-bind-address=0", "--health-probe-bind-address=0", "--webhook-port=0", "--kubeconfig="+theBed.Kubeconfig)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("build-controller --controllers=%s exited 0:\n%s", component, out)
			}
			if want := "OpenShift serves build.openshift.io on this cluster"; !strings.Contains(string(out), want) {
				t.Errorf("build-controller --controllers=%s: %v, want %q in:\n%s", component, err, want, out)
			}
			if want := "manifests/openshift-builds"; !strings.Contains(string(out), want) {
				t.Errorf("the refusal does not name %s:\n%s", want, out)
			}
		})
	}
}

// kubectlArchway runs kubectl archway (in process) as the bed's admin and
// returns its output.
func kubectlArchway(ctx context.Context, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SetArgs(append(args, "--kubeconfig", theBed.Kubeconfig))
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

// TestInstallChoosesTheCustomBuilderMode: kubectl archway install reads
// openshift-apiserver's discovery of build.openshift.io and chooses the
// custom-builder mode (manifests/openshift-builds and its CRDs, no
// build.openshift.io CRD); told to install archway's own Build API
// instead, it applies nothing and names the mode to install.
func TestInstallChoosesTheCustomBuilderMode(t *testing.T) {
	requireOpenShift(t)
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	defer cancel()
	manifests := filepath.Join(bed.RepoRoot(), "manifests")
	out, err := kubectlArchway(ctx, "install", "--manifests", manifests, "--dry-run")
	if err != nil {
		t.Fatalf("kubectl archway install --dry-run: %v\n%s", err, out)
	}
	for _, want := range []string{
		"build.openshift.io on this cluster: OpenShift (its Build capability is on): installing the custom-builder mode",
		"would apply " + filepath.Join(manifests, "openshift-builds", "crd"),
		"would apply " + filepath.Join(manifests, "openshift-builds") + " (",
		"validatingwebhookconfiguration/archway-custom-builds",
		"deployment/archway-custom-builds -n archway-system",
		"customresourcedefinition/multiarchbuilds.build.archway.dev",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "."+custombuildsGroup) {
		t.Errorf("the plan holds a %s CRD:\n%s", custombuildsGroup, out)
	}

	out, err = kubectlArchway(ctx, "install", "--manifests", manifests, "-k", filepath.Join(manifests, "default"))
	if err == nil || !strings.Contains(err.Error(), "nothing was applied") ||
		!strings.Contains(err.Error(), "holds CustomResourceDefinition builds.build.openshift.io, but OpenShift serves build.openshift.io") {
		t.Errorf("kubectl archway install -k manifests/default: %v, want refused\n%s", err, out)
	}
	crds := apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	if _, err := dyn.Resource(crds).Get(ctx, "builds."+custombuildsGroup, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("CustomResourceDefinition builds.%s: %v, want none", custombuildsGroup, err)
	}
}

// custombuildsGroup is OpenShift's build API group.
const custombuildsGroup = "build.openshift.io"
