package imagetrigger

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/trigger/imagechange"
	"github.com/archway-build/archway/pkg/placement/image"
	"github.com/archway-build/archway/test/bed"
)

// TestImageStreamTagTrigger shows an ImageChange trigger on the
// ImageStreamTag of a BuildConfig's strategy from, where the apiserver
// serves image streams (the CRD generated from openshift/api): the tag's
// image starts the first build, and a new image pushed to the tag starts
// the next at once, through the watch on image streams (the poll
// interval is an hour), each build built from that image and triggered
// by it, and status.imageChangeTriggers records it as OpenShift does.
func TestImageStreamTagTrigger(t *testing.T) {
	h := newHarness(t, "stream-trigger")
	suite.ServeImageStreams(t, h.ctx)
	const (
		first  = "registry.example.com/images/base@sha256:1111111111111111111111111111111111111111111111111111111111111111"
		second = "registry.example.com/images/base@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	)
	stream := bed.ImageStream(h.ns, "base", "registry.example.com/images/base", map[string][]string{"1.0": {first}})
	h.create(stream)
	suite.StartManager(t, "trigger", suite.ManagerOptions(h.ns), func(_ context.Context, mgr ctrl.Manager) error {
		starter := instantiate.NewStarter(mgr.GetClient(), mgr.GetAPIReader())
		return imagechange.Setup(mgr, starter, image.NewRemote(image.RemoteOptions{Timeout: 10 * time.Second}), imagechange.Options{
			Interval: time.Hour, BuilderServiceAccount: "builder", Registry: prometheus.NewRegistry(), SkipNameValidation: true,
			WatchImageStreams: true,
		})
	})
	bc := h.bcObj("app", "")
	bc.Spec.Strategy.DockerStrategy.From = &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "base:1.0"}
	h.create(bc)

	check := func(b buildv1.Build, image string) {
		t.Helper()
		if from := b.Spec.Strategy.DockerStrategy.From; from == nil || *from != (corev1.ObjectReference{Kind: "DockerImage", Name: image}) {
			t.Errorf("build %s from %+v, want DockerImage %s", b.Name, from, image)
		}
		want := corev1.ObjectReference{Kind: "ImageStreamTag", Namespace: h.ns, Name: "base:1.0"}
		if c := b.Spec.TriggeredBy; len(c) != 1 || c[0].ImageChangeBuild == nil || c[0].ImageChangeBuild.ImageID != image ||
			c[0].ImageChangeBuild.FromRef == nil || *c[0].ImageChangeBuild.FromRef != want {
			t.Errorf("build %s triggered by %+v, want the image %s of %+v", b.Name, c, image, want)
		}
		st := h.bc("app").Status.ImageChangeTriggers
		if len(st) != 1 || st[0].LastTriggeredImageID != image || st[0].From != (buildv1.ImageStreamTagReference{Namespace: h.ns, Name: "base:1.0"}) {
			t.Errorf("status.imageChangeTriggers %+v, want the last image %s of %s/base:1.0", st, image, h.ns)
		}
	}
	builds := h.waitBuilds(1)
	check(builds[0], first)

	// The registry imports a new image into the tag.
	if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(stream), stream); err != nil {
		t.Fatal(err)
	}
	next := bed.ImageStream(h.ns, "base", "registry.example.com/images/base", map[string][]string{"1.0": {second, first}})
	stream.Object["status"] = next.Object["status"]
	if err := k8s.Update(h.ctx, stream); err != nil {
		t.Fatal(err)
	}
	builds = h.waitBuilds(2)
	check(builds[1], second)
}
