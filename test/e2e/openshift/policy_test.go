package openshift_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/archway-build/archway/pkg/build/custombuilds"
	"github.com/archway-build/archway/test/bed"
	e2e "github.com/archway-build/archway/test/e2e/framework"
)

// installOverlay creates what `oc apply -k manifests/openshift-builds`
// creates, but the CRDs (the suite's bed has them), the objects the suite
// installed (installConfig), the custom-builds webhook's (a test runs the
// webhook itself: startCustomBuildsWebhook) and the objects of the kinds
// named in skip; it deletes them when the test ends.
func installOverlay(t *testing.T, ctx context.Context, skip ...string) {
	t.Helper()
	// Its SecurityContextConstraints' kind, served as on OpenShift.
	if err := theBed.ServeOverlayKinds(ctx); err != nil {
		t.Fatal(err)
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(bed.RepoRoot(), "manifests", "openshift-builds"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range m.Resources() {
		obj, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() == "CustomResourceDefinition" || slices.Contains(skip, u.GetKind()) || e2e.CustomBuilderObject(u) || e2e.CustomBuildsWebhookObject(u) {
			continue
		}
		err = theBed.Client.Create(ctx, u)
		if u.GetKind() == "Namespace" {
			// Kept: the bed has no namespace controller to finish its
			// deletion.
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		t.Cleanup(func() { _ = theBed.Client.Delete(context.Background(), u) })
	}
}

// TestCustomBuildsPolicy: with manifests/openshift-builds installed and its
// ConfigMap naming archway's builder image, the ValidatingAdmissionPolicy
// archway-custom-builds, which kube-apiserver evaluates, admits a
// Custom-strategy Build or BuildConfig only with that image by digest and
// without exposeDockerSocket; other strategies are left alone.
func TestCustomBuildsPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	defer cancel()
	// Registered first, run last: after the policy is deleted.
	t.Cleanup(func() { waitCustomBuildsAdmitted(t) })
	installOverlay(t, ctx, "ConfigMap")
	createCustomBuilderConfigMap(t, ctx, " "+builderImage+" , quay.io/archway/builder:latest")
	ns, err := theBed.CreateNamespace(ctx, "policy")
	if err != nil {
		t.Fatal(err)
	}
	checkCustomBuildsRule(t, ctx, ns)
}

// TestCustomBuildsWebhook: the same rule served by build-controller's
// custom-builds-webhook (pkg/build/custombuilds), as openshift-apiserver,
// which evaluates no policy, calls it: the webhook configuration of
// manifests/openshift-builds/webhook, without the policy. An update that
// leaves the strategy as it was is admitted after the ConfigMap stops
// naming its image; one that changes it is judged. While the webhook is
// down, custom builders are refused (failurePolicy Fail) and every other
// write, an update of a custom builder's labels among them, is admitted
// (matchConditions).
func TestCustomBuildsWebhook(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	defer cancel()
	t.Cleanup(func() { waitCustomBuildsAdmitted(t) })
	installOverlay(t, ctx, "ConfigMap", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
	cm := createCustomBuilderConfigMap(t, ctx, " "+builderImage+" , quay.io/archway/builder:latest")
	webhooks, err := theBed.StartWebhooks(ctx, theBed.Client.Scheme(), []string{bed.CustomBuildsWebhookConfiguration},
		func(mgr ctrl.Manager) error { return custombuilds.Setup(mgr, cm.Namespace) })
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			webhooks.Stop()
		}
		_ = theBed.Client.Delete(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: custombuilds.WebhookConfigurationName}})
	})
	if err := webhooks.Install(); err != nil {
		t.Fatal(err)
	}
	ns, err := theBed.CreateNamespace(ctx, "webhook")
	if err != nil {
		t.Fatal(err)
	}
	checkCustomBuildsRule(t, ctx, ns)

	// A BuildConfig and a Build of an image the ConfigMap then stops
	// naming.
	other := "quay.io/archway/builder@sha256:" + strings.Repeat("2", 64)
	cm.Data["image"] = builderImage + "," + other
	if err := theBed.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	bc, b := customBuilder("BuildConfig", ns, other), customBuilder("Build", ns, other)
	// Complete: no pod for the stand-in to make.
	b.Object["status"] = map[string]any{"phase": "Complete"}
	for _, u := range []*unstructured.Unstructured{bc, b} {
		if err := waitFor(ctx, "the webhook to admit the second image", func() (bool, error) {
			return theBed.Client.Create(ctx, u) == nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	cm.Data["image"] = builderImage
	if err := theBed.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, "the webhook to refuse the second image", func() (bool, error) {
		return theBed.Client.Create(ctx, customBuilder("Build", ns, other), client.DryRunAll) != nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	relabel := func(u *unstructured.Unstructured, value string) error {
		u.SetLabels(map[string]string{"team": value})
		return theBed.Client.Update(ctx, u)
	}
	t.Run("an update keeping the strategy", func(t *testing.T) {
		for _, u := range []*unstructured.Unstructured{bc, b} {
			if err := relabel(u, "a"); err != nil {
				t.Errorf("%s: refused: %v", u.GetKind(), err)
			}
		}
	})
	t.Run("an update changing the strategy", func(t *testing.T) {
		u := bc.DeepCopy()
		if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "PLATFORMS", "value": "linux/amd64"}},
			"spec", "strategy", "customStrategy", "env"); err != nil {
			t.Fatal(err)
		}
		if err := theBed.Client.Update(ctx, u); err == nil || !strings.Contains(err.Error(), "not DockerImage "+other) {
			t.Errorf("admitted or refused otherwise: %v", err)
		}
	})

	// The outage: once the server is gone, the apiserver's calls fail.
	webhooks.Stop()
	stopped = true
	if err := waitFor(ctx, "the apiserver to fail calling the stopped webhook", func() (bool, error) {
		err := theBed.Client.Create(ctx, customBuilder("Build", ns, builderImage), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "failed calling webhook"), nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Run("while the webhook is down", func(t *testing.T) {
		if err := theBed.Client.Create(ctx, customBuilder("BuildConfig", ns, builderImage), client.DryRunAll); err == nil {
			t.Error("a custom BuildConfig was admitted unchecked")
		}
		docker := newBuild("Build", ns, map[string]any{"type": "Docker", "dockerStrategy": map[string]any{}})
		if err := theBed.Client.Create(ctx, docker, client.DryRunAll); err != nil {
			t.Errorf("a Docker Build was refused: %v", err)
		}
		for _, u := range []*unstructured.Unstructured{bc, b} {
			if err := relabel(u, "b"); err != nil {
				t.Errorf("relabelling a custom %s was refused: %v", u.GetKind(), err)
			}
		}
	})
}

// createCustomBuilderConfigMap creates the ConfigMap archway-custom-builder
// naming images, for the test.
func createCustomBuilderConfigMap(t *testing.T, ctx context.Context, images string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "archway-system", Name: custombuilds.ConfigMapName},
		Data:       map[string]string{custombuilds.ImageKey: images},
	}
	if err := theBed.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = theBed.Client.Delete(context.Background(), cm) })
	return cm
}

// waitCustomBuildsAdmitted waits until a Custom-strategy Build of another
// builder image is admitted again: the suite's other tests create custom
// Builds with no ConfigMap naming their image. Run it as the last cleanup,
// once the policy or the webhook configuration is deleted.
func waitCustomBuildsAdmitted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.LongTimeout)
	defer cancel()
	ns, err := theBed.CreateNamespace(ctx, "admitted")
	if err != nil {
		t.Error(err)
		return
	}
	other := customBuilder("Build", ns, "quay.io/other/builder:1")
	if err := waitFor(ctx, "the rule to be gone", func() (bool, error) {
		return theBed.Client.Create(ctx, other.DeepCopy(), client.DryRunAll) == nil, nil
	}); err != nil {
		t.Error(err)
	}
}

// newBuild is a Build or BuildConfig (kind) of strategy in ns.
func newBuild(kind, ns string, strategy map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "build.openshift.io/v1", "kind": kind,
		"metadata": map[string]any{"generateName": "b-", "namespace": ns},
		"spec": map[string]any{
			"source":   map[string]any{"type": "Dockerfile", "dockerfile": "FROM scratch\n"},
			"strategy": strategy,
		},
	}}
}

// customStrategy is a Custom strategy whose builder image is from, with
// the fields of extra.
func customStrategy(from map[string]any, extra map[string]any) map[string]any {
	cs := map[string]any{"from": from}
	for k, v := range extra {
		cs[k] = v
	}
	return map[string]any{"type": "Custom", "customStrategy": cs}
}

// customBuilder is a Build or BuildConfig (kind) of the Custom strategy
// running image.
func customBuilder(kind, ns, image string) *unstructured.Unstructured {
	return newBuild(kind, ns, customStrategy(map[string]any{"kind": "DockerImage", "name": image}, nil))
}

// checkCustomBuildsRule checks the rule, however it is enforced, once it
// refuses another image, with the ConfigMap naming builderImage (and a
// tag, which does not count): in ns, dry-run creates of custom builders
// of archway's image and others, and an update that swaps the image of an
// admitted BuildConfig.
func checkCustomBuildsRule(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	archway := map[string]any{"kind": "DockerImage", "name": builderImage}
	create := func(u *unstructured.Unstructured) error {
		return theBed.Client.Create(ctx, u.DeepCopy(), client.DryRunAll)
	}
	// The rule takes effect a moment after it is installed: wait until it
	// refuses another image.
	evilImage := "quay.io/evil/builder@sha256:" + strings.Repeat("e", 64)
	evil := customBuilder("Build", ns, evilImage)
	if err := waitFor(ctx, "the rule to refuse another builder image", func() (bool, error) {
		err := create(evil)
		if err != nil && !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			return false, err
		}
		return err != nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		obj    *unstructured.Unstructured
		refuse string // "" admits
	}{
		{"archway's image by digest", customBuilder("Build", ns, builderImage), ""},
		{"the BuildConfig of archway's image", customBuilder("BuildConfig", ns, builderImage), ""},
		{"another image", evil, "may run only archway's builder image, by digest (" + builderImage + "), not DockerImage quay.io/evil"},
		{"another image in a BuildConfig", customBuilder("BuildConfig", ns, evilImage), "may run only archway's builder image"},
		{"archway's image by tag", customBuilder("Build", ns, "quay.io/archway/builder:latest"), "may run only archway's builder image"},
		{"an image stream tag", newBuild("Build", ns, customStrategy(map[string]any{"kind": "ImageStreamTag", "name": "builder:latest"}, nil)), "not ImageStreamTag builder:latest"},
		{"the Docker socket", newBuild("Build", ns, customStrategy(archway, map[string]any{"exposeDockerSocket": true})), "exposeDockerSocket is refused"},
		{"a custom strategy under another type", newBuild("Build", ns, map[string]any{"type": "Docker", "customStrategy": map[string]any{"from": map[string]any{"kind": "DockerImage", "name": "quay.io/evil/x:1"}}}), "may run only archway's builder image"},
		{"the Docker strategy", newBuild("Build", ns, map[string]any{"type": "Docker", "dockerStrategy": map[string]any{}}), ""},
		// OpenShift appends the strategy's env to the custom pod's own:
		// a BUILD there would replace the Build the custom builder reads.
		{"the Build replaced through the env", newBuild("Build", ns, customStrategy(archway, map[string]any{"env": []any{
			map[string]any{"name": "PLATFORMS", "value": "linux/amd64"},
			map[string]any{"name": "BUILD", "value": `{"spec":{"strategy":{"customStrategy":{"from":{"name":"quay.io/evil/x:1"}}}}}`},
		}})), "spec.strategy.customStrategy.env: BUILD would replace what OpenShift sets on the custom builder's pod"},
		{"archway's own variables", newBuild("Build", ns, customStrategy(archway, map[string]any{"env": []any{
			map[string]any{"name": "PLATFORMS", "value": "linux/amd64"}, map[string]any{"name": "BUILD_ARG_GO", "value": "1.26"},
			map[string]any{"name": "SOURCE_DATE_EPOCH", "value": "0"},
		}})), ""},
		{"secrets of the custom pod", newBuild("Build", ns, customStrategy(archway, map[string]any{"secrets": []any{
			map[string]any{"secretSource": map[string]any{"name": "creds"}, "mountPath": "/var/run/configs/openshift.io/build-system"},
		}})), "customStrategy.secrets are mounted into the custom builder's pod only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := create(tc.obj)
			switch {
			case tc.refuse == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refuse != "" && err == nil:
				t.Errorf("admitted, want refused with %q", tc.refuse)
			case tc.refuse != "" && !strings.Contains(err.Error(), tc.refuse):
				t.Errorf("refused with %v, want %q", err, tc.refuse)
			}
		})
	}
	// An update that swaps the image of an admitted BuildConfig is refused
	// too.
	bc := customBuilder("BuildConfig", ns, builderImage)
	if err := theBed.Client.Create(ctx, bc); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(bc.Object, "quay.io/evil/builder:1", "spec", "strategy", "customStrategy", "from", "name"); err != nil {
		t.Fatal(err)
	}
	if err := theBed.Client.Update(ctx, bc); err == nil || !strings.Contains(err.Error(), "may run only archway's builder image") {
		t.Errorf("update to another image: %v, want refused", err)
	}
}
