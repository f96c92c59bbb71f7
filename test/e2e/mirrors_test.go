package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/registries"
	"github.com/archway-build/archway/test/bed"
)

// mirrorOrigin is where the builds say their base is: a registry no
// machine reaches (.invalid never resolves), as a public registry is out
// of reach from an air-gapped cluster.
const mirrorOrigin = "origin.archway.invalid/team"

// setRegistriesConf writes the registries ConfigMap build-controller
// watches (in its namespace: default on the bed) and waits until the
// controller says it applied that version.
func setRegistriesConf(t *testing.T, ctx context.Context, conf string) {
	t.Helper()
	rv := writeConfigMap(t, ctx, metav1.NamespaceDefault, placement.DefaultRegistriesConfigMap, map[string]string{registries.RegistriesConfKey: conf})
	waitRegistriesApplied(t, ctx, metav1.NamespaceDefault, "ConfigMap", placement.DefaultRegistriesConfigMap, rv)
}

// writeConfigMap creates or replaces ConfigMap ns/name with data and
// returns its resourceVersion.
func writeConfigMap(t *testing.T, ctx context.Context, ns, name string, data map[string]string) string {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	err := env.Bed.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	cm.Data = data
	switch {
	case apierrors.IsNotFound(err):
		err = env.Bed.Client.Create(ctx, cm)
	case err == nil:
		err = env.Bed.Client.Update(ctx, cm)
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm.ResourceVersion
}

// waitRegistriesApplied waits until build-controller says it applied
// version resourceVersion of the registry configuration's source kind
// ns/name (its RegistryConfigurationApplied event; a cluster-scoped
// object's are in default).
func waitRegistriesApplied(t *testing.T, ctx context.Context, ns, kind, name, resourceVersion string) {
	t.Helper()
	want := "resourceVersion " + resourceVersion + ")"
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
		var list eventsv1.EventList
		if err := env.Bed.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Name == name && e.Reason == registries.EventConfigurationApplied &&
				strings.Contains(e.Note, want) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("build-controller never applied %s %s/%s (%s): %v", kind, ns, name, want, err)
	}
}

// TestBuildPullsThroughMirror: a base image is only at a mirror; the
// Build's dockerStrategy.from names its original location. Without
// registry configuration the build fails pulling from the original
// location; once the registries ConfigMap placement follows names the
// mirror, build-controller hands it to the build pods and the same build
// pulls the base from the mirror and completes; with the original
// location blocked and a mirror for digests only, a Build naming a tag
// fails before any pod, saying how to fix it.
func TestBuildPullsThroughMirror(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mirror := env.Bed.Registry.Host + "/mirrored"
	g.Expect(env.Bed.Registry.CopyIndex(ctx, env.Bed.BaseImage, mirror+"/base:1", nil)).To(Succeed())
	t.Cleanup(func() {
		_ = env.Bed.Client.Delete(context.WithoutCancel(ctx), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: metav1.NamespaceDefault, Name: placement.DefaultRegistriesConfigMap}})
	})
	from := mirrorOrigin + "/base:1"
	conf := func(pull string, blocked bool) string {
		return fmt.Sprintf("[[registry]]\nlocation = %q\nblocked = %v\n[[registry.mirror]]\nlocation = %q\npull-from-mirror = %q\n",
			mirrorOrigin, blocked, mirror, pull)
	}
	platforms := []string{"linux/amd64", "linux/arm64"}

	t.Run("without the mirror the original location fails", func(t *testing.T) {
		g := NewWithT(t)
		setRegistriesConf(t, ctx, "")
		h := newHarness(t, "nomirror")
		h.fromBuildConfig(from, platforms, nil)
		h.startBuild()
		b := h.waitTerminal()
		g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseFailed), "message: %s", b.Status.Message)
		g.Expect(h.events()).To(ContainElement(buildv1.EventReasonBaseImageCheckSkipped))
		// The first platform to fail says why; the other may be cancelled.
		var said string
		for _, e := range b.Status.Platforms {
			said += e.Message + e.LogSnippet
		}
		g.Expect(said).To(ContainSubstring("origin.archway.invalid"))
	})
	t.Run("the registries ConfigMap's mirror serves the base", func(t *testing.T) {
		g := NewWithT(t)
		setRegistriesConf(t, ctx, conf("tag-only", false))
		h := newHarness(t, "mirror")
		h.fromBuildConfig(from, platforms, nil)
		h.startBuild()
		b := h.waitTerminal()
		g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseComplete), "message: %s, platforms: %+v", b.Status.Message, b.Status.Platforms)
		g.Expect(h.events()).NotTo(ContainElement(buildv1.EventReasonBaseImageCheckSkipped), "the check before the pods read the base through the mirror")
		machines, err := indexChildren(h.ctx, h.output(), "/machine")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(machines).To(Equal(map[string]string{"linux/amd64": "x86_64", "linux/arm64": "aarch64"}))
	})
	t.Run("a blocked origin with digest mirrors refuses a tag before any pod", func(t *testing.T) {
		g := NewWithT(t)
		setRegistriesConf(t, ctx, conf("digest-only", true))
		h := newHarness(t, "blocked")
		h.fromBuildConfig(from, platforms, nil)
		h.startBuild()
		b := h.waitTerminal()
		g.Expect(b.Status.Phase).To(Equal(buildv1.BuildPhaseFailed), "message: %s", b.Status.Message)
		g.Expect(b.Status.Reason).To(Equal(buildv1.StatusReasonPullBuilderImageFailed))
		g.Expect(b.Status.Message).To(ContainSubstring("registry " + mirrorOrigin + " is blocked by the cluster's registry configuration"))
		g.Expect(b.Status.Message).To(ContainSubstring("name the image by digest"))
		g.Expect(h.tl.PodNames()).To(BeEmpty(), "no pod was ever created")
	})
}
