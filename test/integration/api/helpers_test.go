package api

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns, err := b.CreateNamespace(context.Background(), "api")
	if err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return ns
}

// object returns an unstructured object of kind (Build or BuildConfig)
// with spec.
func object(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "build.openshift.io/v1",
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       spec,
	}}
}

// validSpec is a spec every test starts from: a Docker build of an inline
// Dockerfile for two platforms, pushed to a registry.
func validSpec() map[string]any {
	return map[string]any{
		"platforms": []any{"linux/amd64", "linux/arm64"},
		"source": map[string]any{
			"type":       "Dockerfile",
			"dockerfile": "FROM busybox\n",
		},
		"strategy": map[string]any{"type": "Docker", "dockerStrategy": map[string]any{}},
		"output": map[string]any{
			"to": map[string]any{"kind": "DockerImage", "name": "registry.example.com/team/app:latest"},
		},
	}
}

// fieldErrors returns the field errors of an Invalid error as the apiserver
// prints them ("spec.platforms[2]: Invalid value: ..."), or the error itself
// when it is not one.
func fieldErrors(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		if err == nil {
			return nil
		}
		return []string{"not an Invalid error: " + err.Error()}
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		out = append(out, c.Field+": "+c.Message)
	}
	return out
}

// set sets the field at path in obj, creating maps on the way.
func set(obj map[string]any, value any, path ...string) {
	for _, p := range path[:len(path)-1] {
		next, ok := obj[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			obj[p] = next
		}
		obj = next
	}
	obj[path[len(path)-1]] = value
}

// typedBuild returns a valid Build for linux/amd64 and linux/arm64.
func typedBuild(namespace, name string) *buildv1.Build {
	return &buildv1.Build{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: buildv1.BuildSpec{CommonSpec: buildv1.CommonSpec{
			Platforms: []string{"linux/amd64", "linux/arm64"},
			Source:    buildv1.BuildSource{Type: buildv1.BuildSourceDockerfile, Dockerfile: ptr.To("FROM busybox\n")},
			Strategy: buildv1.BuildStrategy{
				Type:           buildv1.DockerBuildStrategyType,
				DockerStrategy: &buildv1.DockerBuildStrategy{},
			},
			Output: buildv1.BuildOutput{
				To:         &corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/team/app:latest"},
				PushSecret: &corev1.LocalObjectReference{Name: "push"},
			},
		}},
	}
}

func resourceMustParse(s string) resource.Quantity { return resource.MustParse(s) }

// unstructuredNegotiator serves raw JSON to a REST client.
func unstructuredNegotiator() runtime.NegotiatedSerializer {
	return serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
}
