//go:build !scratch

package api

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/imagestream"
)

// TestImageStreamReferences shows the admission of image stream
// references, as the webhook configuration of manifests/build-triggers
// has the apiserver call build-triggers' webhook: refused, naming each
// field, where the cluster serves no image streams; accepted once it
// does (the ImageStream CRD generated from openshift/api); refused again
// while the webhook is down, when Builds without such references are
// still created.
func TestImageStreamReferences(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	webhooks, err := b.StartWebhooks(ctx, b.Client.Scheme(), []string{"manifests/build-triggers/validating_webhook_configuration.yaml"},
		func(mgr ctrl.Manager) error { return imagestream.SetupWebhook(mgr) })
	g.Expect(err).NotTo(HaveOccurred())
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			webhooks.Stop()
		}
		_ = b.Client.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: imagestream.WebhookConfigurationName}})
	})
	g.Expect(webhooks.Install()).To(Succeed())
	ns := newNamespace(t)

	fromTag := typedBuild(ns, "from-tag")
	fromTag.Spec.Strategy.DockerStrategy.From = &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "base:1.0"}
	toTag := typedBuild(ns, "to-tag")
	toTag.Spec.Output.To = &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "app:latest"}
	source := typedBuild(ns, "source-image")
	source.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType,
		SourceStrategy: &buildv1.SourceBuildStrategy{From: corev1.ObjectReference{Kind: "ImageStreamImage", Name: "builder@sha256:0123"}}}
	triggered := &buildv1.BuildConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "triggered"},
		Spec: buildv1.BuildConfigSpec{CommonSpec: typedBuild(ns, "").Spec.CommonSpec, Triggers: []buildv1.BuildTriggerPolicy{{
			Type:        buildv1.ImageChangeBuildTriggerType,
			ImageChange: &buildv1.ImageChangeTrigger{From: &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "base:1.0"}},
		}}},
	}
	refused := map[client.Object]string{
		fromTag:   "spec.strategy.dockerStrategy.from: kind ImageStreamTag needs OpenShift image streams",
		toTag:     "spec.output.to: kind ImageStreamTag needs OpenShift image streams",
		source:    "spec.strategy.sourceStrategy.from: kind ImageStreamImage needs OpenShift image streams",
		triggered: "spec.triggers[0].imageChange.from: kind ImageStreamTag needs OpenShift image streams",
	}
	create := func(obj client.Object) error {
		return b.Client.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
	}

	t.Run("without image streams", func(t *testing.T) {
		g := NewWithT(t)
		for obj, msg := range refused {
			err := create(obj)
			g.Expect(err).To(MatchError(ContainSubstring(msg)), obj.GetName())
			g.Expect(err).To(MatchError(ContainSubstring("which this cluster does not serve: use kind DockerImage")), obj.GetName())
		}
		g.Expect(create(typedBuild(ns, "docker-image"))).To(Succeed())
	})

	remove, err := b.ServeImageStreams(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = remove() })

	t.Run("with image streams", func(t *testing.T) {
		g := NewWithT(t)
		for obj := range refused {
			g.Expect(create(obj)).To(Succeed(), obj.GetName())
		}
		bad := typedBuild(ns, "bad-name")
		bad.Spec.Strategy.DockerStrategy.From = &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "base"}
		g.Expect(create(bad)).To(MatchError(ContainSubstring(
			`spec.strategy.dockerStrategy.from.name: an ImageStreamTag's name is <stream>:<tag>, e.g. base:1.0, not "base"`)))
		// build-controller resolves with its own rights: another
		// namespace's streams are not named.
		other := typedBuild(ns, "other-namespace")
		other.Spec.Strategy.DockerStrategy.From = &corev1.ObjectReference{Kind: "ImageStreamTag", Namespace: "kube-system", Name: "base:1.0"}
		g.Expect(create(other)).To(MatchError(ContainSubstring(
			`spec.strategy.dockerStrategy.from.namespace: "kube-system": only image streams of the object's own namespace (` + ns + `) can be named`)))
	})

	t.Run("an object written while they were served stays writable", func(t *testing.T) {
		g := NewWithT(t)
		bc := triggered.DeepCopy()
		g.Expect(b.Client.Create(ctx, bc)).To(Succeed())
		g.Expect(remove()).To(Succeed())
		bc.Labels = map[string]string{"team": "a"}
		g.Expect(b.Client.Update(ctx, bc)).To(Succeed())
		bc.Spec.Output.To = &corev1.ObjectReference{Kind: "ImageStreamTag", Name: "app:latest"}
		g.Expect(b.Client.Update(ctx, bc)).To(MatchError(ContainSubstring("spec.output.to: kind ImageStreamTag needs OpenShift image streams")))
	})

	t.Run("webhook down", func(t *testing.T) {
		g := NewWithT(t)
		webhooks.Stop()
		stopped = true
		for obj := range refused {
			err := create(obj)
			g.Expect(err).To(MatchError(ContainSubstring(`failed calling webhook "image-stream-references.build.openshift.io"`)), obj.GetName())
		}
		// The configuration's matchConditions send nothing else to it.
		g.Expect(create(typedBuild(ns, "docker-image"))).To(Succeed())
		bc := triggered.DeepCopy()
		bc.Name, bc.Spec.Triggers = "plain", nil
		g.Expect(create(bc)).To(Succeed())
	})
}
