package build

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// TestPodSecurityBaselineRefusal: in a namespace enforcing Pod Security
// baseline, where kube-apiserver does not exempt the controller (the test's
// controller runs as the bed's administrator, not as build-controller's
// service account the shipped admission configuration exempts), the
// apiserver refuses the build pod for its SYS_ADMIN. The platform, and so
// the Build, fails with PodSecurityForbidsBuildPod and a message naming both
// ways out, not the apiserver's text alone.
func TestPodSecurityBaselineRefusal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "podsec")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.ns}}
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"baseline","pod-security.kubernetes.io/enforce-version":"latest"}}}`)
	if err := k8s.Patch(h.ctx, ns, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	h.cfg = testConfig(nil)
	h.ctrl = startController(t, h.ns, h.cfg)
	h.create(h.buildObj("refused", amd64))

	b := h.waitBuild("the platform ended", func(b *buildv1.Build) bool { return b.Status.Phase.IsTerminal() })
	if len(b.Status.Platforms) != 1 {
		t.Fatalf("platforms: %+v", b.Status.Platforms)
	}
	e := b.Status.Platforms[0]
	if e.Reason != buildv1.StatusReasonPodSecurityForbidsBuildPod {
		t.Errorf("platform reason %q, want %q (message %q)", e.Reason, buildv1.StatusReasonPodSecurityForbidsBuildPod, e.Message)
	}
	for _, want := range []string{
		`violates PodSecurity "baseline:latest"`,
		"label namespace " + h.ns + " pod-security.kubernetes.io/enforce=privileged",
		"manifests/podsecurity/admission-configuration.yaml",
	} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("platform message %q does not say %q", e.Message, want)
		}
	}
	if b.Status.Phase != buildv1.BuildPhaseError || !strings.Contains(b.Status.Message, string(buildv1.StatusReasonPodSecurityForbidsBuildPod)) {
		t.Errorf("build: phase %s, message %q: want Error naming %s", b.Status.Phase, b.Status.Message, buildv1.StatusReasonPodSecurityForbidsBuildPod)
	}
}
