package build

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/imagestream"
	"github.com/archway-build/archway/test/bed"
)

// TestImageStreamResolution resolves a Build's image stream references
// where the apiserver serves image streams (the ImageStream CRD generated
// from openshift/api): the ImageStreamTag of its from to the tag's
// current image and that of its output to the stream's repository and
// tag, recorded once on the Build and handed to every platform's pod; a
// tag without an image fails the Build with InvalidImageReference, and a
// stream that does not exist an output with InvalidOutputReference.
func TestImageStreamResolution(t *testing.T) {
	h := newHarness(t, "imagestreams")
	suite.ServeImageStreams(t, h.ctx)
	const (
		base = "registry.example.com/images/base@sha256:1111111111111111111111111111111111111111111111111111111111111111"
		old  = "registry.example.com/images/base@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	)
	for _, is := range []*unstructured.Unstructured{
		bed.ImageStream(h.ns, "base", "registry.example.com/images/base", map[string][]string{"1.0": {base, old}, "next": nil}),
		bed.ImageStream(h.ns, "app", "image-registry.openshift-image-registry.svc:5000/"+h.ns+"/app", nil),
	} {
		if err := k8s.Create(h.ctx, is); err != nil {
			t.Fatal(err)
		}
	}
	h.ctrl = startController(t, h.ns, testConfig(nil))

	t.Run("resolved once, for every pod", func(t *testing.T) {
		b := h.buildObj("resolved", amd64, arm64)
		b.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{From: &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "base:1.0"}}
		b.Spec.Output.To = &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "app:latest"}
		h.create(b)
		h.waitPodNames(h.withManifestListPod([]string{h.platformPod(amd64), h.platformPod(arm64)})...)
		got := h.get()
		var recorded map[string]string
		if err := json.Unmarshal([]byte(got.Annotations[imagestream.ResolvedImagesAnnotation]), &recorded); err != nil {
			t.Fatalf("annotation %s: %v", imagestream.ResolvedImagesAnnotation, err)
		}
		wantOut := "image-registry.openshift-image-registry.svc:5000/" + h.ns + "/app:latest"
		want := map[string]string{imagestream.FieldDockerFrom: base, imagestream.FieldOutputTo: wantOut}
		if len(recorded) != 2 || recorded[imagestream.FieldDockerFrom] != base || recorded[imagestream.FieldOutputTo] != wantOut {
			t.Errorf("recorded %v, want %v", recorded, want)
		}
		for _, p := range []string{amd64, arm64} {
			pb := podBuild(t, h.pod(h.platformPod(p)))
			if from := pb.Spec.Strategy.DockerStrategy.From; from == nil || *from != (corev1.ObjectReference{Kind: "DockerImage", Name: base}) {
				t.Errorf("%s: pod's from %+v, want DockerImage %s", p, from, base)
			}
			// Each platform pushes to a tag of its own in that repository.
			if to := pb.Spec.Output.To; to == nil || to.Kind != "DockerImage" || !strings.HasPrefix(to.Name, wantOut+"-linux-") {
				t.Errorf("%s: pod's output %+v, want DockerImage %s-<platform>", p, to, wantOut)
			}
		}
		ml := podBuild(t, h.pod(buildv1.ManifestListPodName(h.build)))
		if to := ml.Spec.Output.To; to == nil || *to != (corev1.ObjectReference{Kind: "DockerImage", Name: wantOut}) {
			t.Errorf("manifest list pod's output %+v, want DockerImage %s", to, wantOut)
		}
	})

	t.Run("a tag without an image", func(t *testing.T) {
		b := h.buildObj("no-image", amd64)
		b.Spec.Strategy.DockerStrategy = &buildv1.DockerBuildStrategy{From: &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "base:next"}}
		h.create(b)
		got := h.waitPhase(buildv1.BuildPhaseFailed, buildv1.StatusReasonInvalidImageReference)
		if want := "spec.strategy.dockerStrategy.from: the image stream tag " + h.ns + "/base:next has no image yet"; !strings.HasPrefix(got.Status.Message, want) {
			t.Errorf("message %q, want it to start with %q", got.Status.Message, want)
		}
		wantNoPods().do(h)
	})

	t.Run("an output stream that does not exist", func(t *testing.T) {
		b := h.buildObj("no-stream", amd64)
		b.Spec.Output.To = &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "missing:latest"}
		h.create(b)
		got := h.waitPhase(buildv1.BuildPhaseFailed, buildv1.StatusReasonInvalidOutputReference)
		if want := "spec.output.to: the image stream " + h.ns + "/missing does not exist"; got.Status.Message != want {
			t.Errorf("message %q, want %q", got.Status.Message, want)
		}
	})
}
