package openshift_test

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/archway-build/archway/test/bed"
)

// TestCustomBuildsRefuseWhatTheyWouldIgnore: OpenShift admits
// Custom-strategy Builds with fields archway's builder cannot honour: an
// image source (spec.source.images) and a binary source (OpenShift streams
// the upload into the custom pod alone). The custom pod refuses each,
// naming the field, and the Build fails before any platform's pod or
// MultiArchBuild is made.
func TestCustomBuildsRefuseWhatTheyWouldIgnore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		source map[string]any
		want   string
	}{
		{"images", map[string]any{"type": "Dockerfile", "dockerfile": "FROM " + theBed.BaseImage + "\nCOPY app /app\n",
			"images": []any{map[string]any{
				"from":  map[string]any{"kind": "DockerImage", "name": theBed.BaseImage},
				"paths": []any{map[string]any{"sourcePath": "/bin/true", "destinationDir": "app"}},
			}}}, "source.images is refused"},
		{"binary", map[string]any{"type": "Binary", "binary": map[string]any{}}, "source.binary is refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
			defer cancel()
			ns, err := theBed.CreateNamespace(ctx, "ocp-refuse")
			if err != nil {
				t.Fatal(err)
			}
			b := newCustomBuild(ns, tc.name+"-1", "", theBed.Registry.Host+"/"+ns+"/app:v1", []string{"linux/amd64", "linux/arm64"})
			if err := unstructured.SetNestedMap(b.Object, tc.source, "spec", "source"); err != nil {
				t.Fatal(err)
			}
			b = createBuild(t, ctx, b)
			if phase := waitEnd(t, ctx, ns, b.GetName()); phase != "Failed" {
				t.Fatalf("Build phase = %s, want Failed", phase)
			}
			log, err := podLog(ctx, ns, b.GetName()+"-build")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(log, tc.want) {
				t.Errorf("the custom pod's log does not say %q:\n%s", tc.want, log)
			}
			pods, err := theBed.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				if p.Name != b.GetName()+"-build" {
					t.Errorf("pod %s was made: a refused Build builds nothing", p.Name)
				}
			}
			if _, err := multiArchBuild(ctx, ns, b.GetName()); !apierrors.IsNotFound(err) {
				t.Errorf("MultiArchBuild: %v, want none made", err)
			}
		})
	}
}
