package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	openshiftbuildv1 "github.com/openshift/api/build/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// readObjects decodes every document of a YAML file.
func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// TestExamplesApply applies every file in examples/ as kubectl apply
// --server-side does (server-side apply rejects fields the schema does not
// declare).
func TestExamplesApply(t *testing.T) {
	files, err := filepath.Glob("../../../examples/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("expected the examples, found %v (%v)", files, err)
	}
	ns := newNamespace(t)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			g := NewWithT(t)
			for _, obj := range readObjects(t, file) {
				obj.SetNamespace(ns)
				err := b.Client.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("kubectl"))
				g.Expect(err).NotTo(HaveOccurred(), "%s %s", obj.GetKind(), obj.GetName())
			}
		})
	}

	t.Run("defaults", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()

		build := &buildv1.Build{}
		g.Expect(b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello-multiarch-1"}, build)).To(Succeed())
		g.Expect(build.Status.Phase).To(Equal(buildv1.BuildPhaseNew), "a new Build reads as New, as in OpenShift")
		g.Expect(build.Spec.Platforms).To(Equal([]string{"linux/amd64", "linux/arm64", "linux/arm/v7"}))

		bc := &buildv1.BuildConfig{}
		g.Expect(b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello-multiarch"}, bc)).To(Succeed())
		g.Expect(bc.Status.LastVersion).To(BeZero())
		g.Expect(bc.Spec.SuccessfulBuildsHistoryLimit).To(HaveValue(BeEquivalentTo(3)))

		single := &buildv1.Build{}
		g.Expect(b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello-1"}, single)).To(Succeed())
		g.Expect(single.Spec.Platforms).To(BeEmpty())
		g.Expect(single.Spec.NodeSelector).To(BeNil(), "null lets the cluster's default build node selector apply")
	})
}

// TestDefaults creates minimal objects and reads OpenShift's defaults back.
func TestDefaults(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	spec := validSpec()
	spec["nodeSelector"] = map[string]any{}
	g.Expect(b.Client.Create(ctx, object("BuildConfig", ns, "minimal", spec))).To(Succeed())
	bc := &buildv1.BuildConfig{}
	g.Expect(b.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "minimal"}, bc)).To(Succeed())
	g.Expect(bc.Spec.RunPolicy).To(Equal(buildv1.BuildRunPolicySerial))
	g.Expect(bc.Spec.SuccessfulBuildsHistoryLimit).To(HaveValue(BeEquivalentTo(5)))
	g.Expect(bc.Spec.FailedBuildsHistoryLimit).To(HaveValue(BeEquivalentTo(5)))
	g.Expect(bc.Spec.NodeSelector).To(Equal(buildv1.OptionalNodeSelector{}), "an empty selector is kept: it turns the default selector off")
	g.Expect(bc.Status.LastVersion).To(BeZero())
}

// TestOpenShiftTypesDecodeServedObjects reads a served Build and BuildConfig
// as openshift/client-go does, with openshift/api's types.
func TestOpenShiftTypesDecodeServedObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	build := typedBuild(ns, "served")
	build.Spec.Revision = &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: &buildv1.GitSourceRevision{Commit: "abc"}}
	g.Expect(b.Client.Create(ctx, build)).To(Succeed())
	build.Status.Phase = buildv1.BuildPhaseComplete
	build.Status.Duration = 62_000_000_000
	build.Status.Output.To = &buildv1.BuildStatusOutputTo{ImageDigest: "sha256:0123"}
	g.Expect(b.Client.Status().Update(ctx, build)).To(Succeed())

	cfg := rest.CopyConfig(b.Config)
	cfg.GroupVersion = &buildv1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = unstructuredNegotiator()
	rc, err := rest.RESTClientFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	raw, err := rc.Get().Namespace(ns).Resource("builds").Name("served").DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	theirs := &openshiftbuildv1.Build{}
	g.Expect(sigsjson.UnmarshalCaseSensitivePreserveInts(raw, theirs)).To(Succeed())
	g.Expect(theirs.Spec.Strategy.Type).To(Equal(openshiftbuildv1.DockerBuildStrategyType))
	g.Expect(theirs.Spec.Output.To.Name).To(Equal("registry.example.com/team/app:latest"))
	g.Expect(theirs.Spec.Revision.Git.Commit).To(Equal("abc"))
	g.Expect(theirs.Status.Phase).To(Equal(openshiftbuildv1.BuildPhaseComplete))
	g.Expect(theirs.Status.Duration.String()).To(Equal("1m2s"))
	g.Expect(theirs.Status.Output.To.ImageDigest).To(Equal("sha256:0123"))
}
