package imagetrigger

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/trigger/imagechange"
)

// pushBase makes ref (on the open registry) the bed's multi-arch base image
// and returns the image ID the trigger should see.
func (h *harness) pushBase(ref string) string {
	h.t.Helper()
	if err := testBed.Registry.CopyIndex(h.ctx, testBed.BaseImage, ref, nil); err != nil {
		h.t.Fatal(err)
	}
	return h.imageID(ref)
}

// pushPlatform makes ref the base image's image of one platform alone: a
// new digest at the same tag.
func (h *harness) pushPlatform(ref, platform string) string {
	h.t.Helper()
	if _, err := testBed.PushBasePlatform(h.ctx, testBed.Registry, ref, platform); err != nil {
		h.t.Fatal(err)
	}
	return h.imageID(ref)
}

func (h *harness) imageID(ref string) string {
	h.t.Helper()
	repo, tag, _ := strings.Cut(strings.TrimPrefix(ref, testBed.Registry.Host+"/"), ":")
	d, err := testBed.Registry.ManifestDigest(h.ctx, repo, tag)
	if err != nil {
		h.t.Fatal(err)
	}
	return testBed.Registry.Host + "/" + repo + "@" + d
}

// wantImageBuild checks that b was started by the image change of base to
// id, as OpenShift records it, and builds exactly that image.
func wantImageBuild(t testing.TB, b buildv1.Build, base, id string) {
	t.Helper()
	c := b.Spec.TriggeredBy
	if len(c) != 1 || c[0].Message != "Image change" || c[0].ImageChangeBuild == nil || c[0].ImageChangeBuild.ImageID != id ||
		c[0].ImageChangeBuild.FromRef == nil || c[0].ImageChangeBuild.FromRef.Kind != "DockerImage" || c[0].ImageChangeBuild.FromRef.Name != base {
		t.Errorf("build %s triggeredBy %+v, want the image change of %s to %s", b.Name, c, base, id)
	}
	if from := b.Spec.Strategy.DockerStrategy.From; from == nil || from.Name != id {
		t.Errorf("build %s builds from %+v, want %s", b.Name, from, id)
	}
}

func wantRecorded(t testing.TB, bc *buildv1.BuildConfig, base, id string) {
	t.Helper()
	st := bc.Status.ImageChangeTriggers
	if len(st) != 1 || st[0].LastTriggeredImageID != id || st[0].From.Name != base || st[0].LastTriggerTime.IsZero() {
		t.Errorf("status.imageChangeTriggers %+v, want %s at %s", st, base, id)
	}
}

// TestImageChangeTrigger: a BuildConfig's first observation of its base
// image starts one build (as OpenShift's trigger does when
// lastTriggeredImageID is empty), polls that see the same digest start
// none, a restarted controller starts none for the image already built,
// and a new digest pushed to the tag starts exactly one more, each naming
// the image and digest in triggeredBy and building that digest.
func TestImageChangeTrigger(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "imagetrigger")
	base := testBed.Registry.Host + "/" + h.ns + "/base:1"
	first := h.pushBase(base)
	tr := startTrigger(t, h.ns, false)
	h.create(h.bcObj("app", base))

	builds := h.waitBuilds(1)
	wantImageBuild(t, builds[0], base, first)
	tr.waitPolls(t, h.ctx, imagechange.ResultUnchanged, 3)
	if got := h.builds(); len(got) != 1 {
		t.Fatalf("%d builds after polls of the same digest, want 1", len(got))
	}
	bc := h.bc("app")
	wantRecorded(t, bc, base, first)
	if bc.Status.LastVersion != 1 {
		t.Errorf("lastVersion %d, want 1", bc.Status.LastVersion)
	}

	tr.stop()
	tr = startTrigger(t, h.ns, false)
	tr.waitPolls(t, h.ctx, imagechange.ResultUnchanged, 2)
	if got := h.builds(); len(got) != 1 {
		t.Fatalf("%d builds after a restart, want 1", len(got))
	}

	second := h.pushPlatform(base, "linux/amd64")
	if second == first {
		t.Fatal("the push did not change the digest")
	}
	builds = h.waitBuilds(2)
	wantImageBuild(t, builds[1], base, second)
	tr.waitPolls(t, h.ctx, imagechange.ResultUnchanged, 3)
	if got := h.builds(); len(got) != 2 {
		t.Fatalf("%d builds after the second digest, want 2", len(got))
	}
	wantRecorded(t, h.bc("app"), base, second)
	if ev := h.events("app", imagechange.EventReasonImageChangeTriggered); len(ev) != 2 {
		t.Errorf("%s events %q, want 2", imagechange.EventReasonImageChangeTriggered, ev)
	}
}

// TestImageChangeTriggerPaused: a paused BuildConfig (the annotation) and
// a paused trigger start no build, whatever the image; the BuildConfig
// builds once it is unpaused.
func TestImageChangeTriggerPaused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "imagetrigger-paused")
	base := testBed.Registry.Host + "/" + h.ns + "/base:1"
	id := h.pushBase(base)
	tr := startTrigger(t, h.ns, false)
	paused := h.bcObj("paused", base)
	paused.Annotations = map[string]string{buildv1.BuildConfigPausedAnnotation: "true"}
	h.create(paused)
	tr.waitPolls(t, h.ctx, imagechange.ResultPaused, 3)
	if got := h.builds(); len(got) != 0 {
		t.Fatalf("a paused BuildConfig has %d builds", len(got))
	}

	pausedTrigger := h.bcObj("paused-trigger", base)
	pausedTrigger.Spec.Triggers[0].ImageChange.Paused = true
	h.create(pausedTrigger)
	tr.waitPolls(t, h.ctx, imagechange.ResultUnchanged, 3)
	if got := h.builds(); len(got) != 0 {
		t.Fatalf("a paused trigger started %d builds", len(got))
	}

	bc := h.bc("paused")
	delete(bc.Annotations, buildv1.BuildConfigPausedAnnotation)
	if err := k8s.Update(h.ctx, bc); err != nil {
		t.Fatal(err)
	}
	builds := h.waitBuilds(1)
	if builds[0].Annotations[buildv1.BuildConfigAnnotation] != "paused" {
		t.Errorf("build %s of %s", builds[0].Name, builds[0].Annotations[buildv1.BuildConfigAnnotation])
	}
	wantImageBuild(t, builds[0], base, id)
}

// TestImageChangeTriggerUnreachable: a base image whose registry cannot be
// reached gives a warning event on the BuildConfig that names the image,
// and no build.
func TestImageChangeTriggerUnreachable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "imagetrigger-unreachable")
	tr := startTrigger(t, h.ns, false)
	base := "127.0.0.1:1/team/base:1"
	h.create(h.bcObj("app", base))
	tr.waitPolls(t, h.ctx, imagechange.ResultError, 2)
	if got := h.builds(); len(got) != 0 {
		t.Fatalf("%d builds from an unreachable image", len(got))
	}
	ev := h.events("app", imagechange.EventReasonImageChangeTriggerFailed)
	if len(ev) == 0 || !strings.Contains(ev[0], "resolving "+base) {
		t.Errorf("%s events %q, want one naming %s", imagechange.EventReasonImageChangeTriggerFailed, ev, base)
	}
	if st := h.bc("app").Status; st.LastVersion != 0 || len(st.ImageChangeTriggers) != 0 {
		t.Errorf("status %+v, want nothing recorded", st)
	}
}

// TestImageChangeTriggerConfigChange: with a ConfigChange trigger, the
// ConfigChange build builds the image as it is, and the trigger records
// that image without a second build (as OpenShift's ConfigChange build
// records the images it resolved); a new digest then starts one.
func TestImageChangeTriggerConfigChange(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "imagetrigger-configchange")
	base := testBed.Registry.Host + "/" + h.ns + "/base:1"
	first := h.pushBase(base)
	tr := startTrigger(t, h.ns, true)
	h.create(h.bcObj("app", base, buildv1.BuildTriggerPolicy{Type: buildv1.ConfigChangeBuildTriggerType}))
	builds := h.waitBuilds(1)
	if c := builds[0].Spec.TriggeredBy; len(c) != 1 || c[0].Message != "Build configuration change" {
		t.Errorf("first build triggeredBy %+v, want the config change", c)
	}
	tr.waitPolls(t, h.ctx, imagechange.ResultUnchanged, 3)
	if got := h.builds(); len(got) != 1 {
		t.Fatalf("%d builds, want the ConfigChange build alone", len(got))
	}
	wantRecorded(t, h.bc("app"), base, first)

	second := h.pushPlatform(base, "linux/arm64")
	builds = h.waitBuilds(2)
	wantImageBuild(t, builds[1], base, second)
}

// TestImageChangeTriggerCredentials: an image on the registry that
// requires credentials is resolved with the BuildConfig's pull secret, or,
// without one, with its builder service account's image pull secrets; with
// neither it is refused, with an event and no build.
func TestImageChangeTriggerCredentials(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "imagetrigger-auth")
	reg := testBed.AuthRegistry
	base := reg.Host + "/" + h.ns + "/base:1"
	if err := reg.CopyIndex(h.ctx, testBed.BaseImage, base, nil); err != nil {
		t.Fatal(err)
	}
	authFile, err := reg.AuthFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := readFile(authFile)
	if err != nil {
		t.Fatal(err)
	}
	h.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pull", Namespace: h.ns}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: data}})
	tr := startTrigger(t, h.ns, false)

	anonymous := h.bcObj("anonymous", base)
	anonymous.Spec.ServiceAccount = "no-secrets"
	h.create(anonymous)
	tr.waitPolls(t, h.ctx, imagechange.ResultError, 1)
	if got := h.builds(); len(got) != 0 {
		t.Fatalf("%d builds without credentials", len(got))
	}

	withSecret := h.bcObj("with-secret", base)
	withSecret.Spec.Strategy.DockerStrategy.PullSecret = &corev1.LocalObjectReference{Name: "pull"}
	h.create(withSecret)
	builds := h.waitBuilds(1)
	if builds[0].Annotations[buildv1.BuildConfigAnnotation] != "with-secret" {
		t.Fatalf("build %s", builds[0].Name)
	}

	h.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: h.ns},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}}})
	h.create(h.bcObj("with-account", base))
	h.waitBuilds(2)
	tr.waitPolls(t, h.ctx, imagechange.ResultError, 1)
	builds = h.builds()
	var names []string
	for _, b := range builds {
		names = append(names, b.Annotations[buildv1.BuildConfigAnnotation])
	}
	slices.Sort(names)
	if strings.Join(names, ",") != "with-account,with-secret" {
		t.Errorf("builds of %v, want one of with-account and one of with-secret", names)
	}
}
