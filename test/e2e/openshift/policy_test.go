package openshift_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/archway-build/archway/test/bed"
	e2e "github.com/archway-build/archway/test/e2e/framework"
)

// installOverlay creates what `oc apply -k manifests/openshift-builds`
// creates, but the CRDs (the suite's bed has them), the objects the suite
// installed (installConfig) and the objects kinds named in skip; it
// deletes them when the test ends.
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
		if u.GetKind() == "CustomResourceDefinition" || strings.Contains(strings.Join(skip, ","), u.GetKind()) || e2e.CustomBuilderObject(u) {
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
// ConfigMap naming archway's builder image, a Custom-strategy Build or
// BuildConfig is admitted only with that image by digest and without
// exposeDockerSocket; other strategies are left alone.
func TestCustomBuildsPolicy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	defer cancel()
	// Registered first, run last: after the policy is deleted.
	var afterAll func()
	t.Cleanup(func() {
		if afterAll != nil {
			afterAll()
		}
	})
	installOverlay(t, ctx, "ConfigMap")
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "archway-system", Name: "archway-custom-builder"},
		Data:       map[string]string{"image": " " + builderImage + " , quay.io/archway/builder:latest"},
	}
	if err := theBed.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = theBed.Client.Delete(context.Background(), cm) })
	ns, err := theBed.CreateNamespace(ctx, "policy")
	if err != nil {
		t.Fatal(err)
	}
	build := func(kind string, strategy map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "build.openshift.io/v1", "kind": kind,
			"metadata": map[string]any{"generateName": "b-", "namespace": ns},
			"spec": map[string]any{
				"source":   map[string]any{"type": "Dockerfile", "dockerfile": "FROM scratch\n"},
				"strategy": strategy,
			},
		}}
		return u
	}
	custom := func(from map[string]any, extra map[string]any) map[string]any {
		cs := map[string]any{"from": from}
		for k, v := range extra {
			cs[k] = v
		}
		return map[string]any{"type": "Custom", "customStrategy": cs}
	}
	archway := map[string]any{"kind": "DockerImage", "name": builderImage}
	create := func(u *unstructured.Unstructured) error {
		return theBed.Client.Create(ctx, u.DeepCopy(), client.DryRunAll)
	}
	// Once the policy is deleted, the suite's other Custom-strategy
	// Builds are admitted again: wait for that.
	afterAll = func() {
		ctx, cancel := context.WithTimeout(context.Background(), bed.LongTimeout)
		defer cancel()
		other := build("Build", custom(map[string]any{"kind": "DockerImage", "name": "quay.io/other/builder:1"}, nil))
		if err := waitFor(ctx, "the policy to be gone", func() (bool, error) {
			return theBed.Client.Create(ctx, other.DeepCopy(), client.DryRunAll) == nil, nil
		}); err != nil {
			t.Error(err)
		}
	}
	// The policy takes effect a moment after it is created: wait until it
	// refuses another image.
	evil := build("Build", custom(map[string]any{"kind": "DockerImage", "name": "quay.io/evil/builder@sha256:" + strings.Repeat("e", 64)}, nil))
	if err := waitFor(ctx, "the policy to refuse another builder image", func() (bool, error) {
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
		{"archway's image by digest", build("Build", custom(archway, nil)), ""},
		{"the BuildConfig of archway's image", build("BuildConfig", custom(archway, nil)), ""},
		{"another image", evil, "may run only archway's builder image, by digest (" + builderImage + "), not DockerImage quay.io/evil"},
		{"another image in a BuildConfig", build("BuildConfig", custom(evil.Object["spec"].(map[string]any)["strategy"].(map[string]any)["customStrategy"].(map[string]any)["from"].(map[string]any), nil)), "may run only archway's builder image"},
		{"archway's image by tag", build("Build", custom(map[string]any{"kind": "DockerImage", "name": "quay.io/archway/builder:latest"}, nil)), "may run only archway's builder image"},
		{"an image stream tag", build("Build", custom(map[string]any{"kind": "ImageStreamTag", "name": "builder:latest"}, nil)), "not ImageStreamTag builder:latest"},
		{"the Docker socket", build("Build", custom(archway, map[string]any{"exposeDockerSocket": true})), "exposeDockerSocket is refused"},
		{"a custom strategy under another type", build("Build", map[string]any{"type": "Docker", "customStrategy": map[string]any{"from": map[string]any{"kind": "DockerImage", "name": "quay.io/evil/x:1"}}}), "may run only archway's builder image"},
		{"the Docker strategy", build("Build", map[string]any{"type": "Docker", "dockerStrategy": map[string]any{}}), ""},
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
	bc := build("BuildConfig", custom(archway, nil))
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
