package build

import (
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	buildcontroller "github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/pkg/placement/registries"
)

// TestBuildPodsGetTheAllowedRegistries: with OpenShift's image config
// allowing some registries only, every build pod is handed them
// ($ARCHWAY_ALLOWED_REGISTRIES), so that the builder refuses a base the
// controller could not see before the pod (a Dockerfile of the source
// repository) on any other registry.
func TestBuildPodsGetTheAllowedRegistries(t *testing.T) {
	h := newHarness(t, "allowedregs")
	img := &configv1.Image{}
	img.Spec.RegistrySources.AllowedRegistries = []string{"registry.example.com", "*.quay.io"}
	gen, err := registries.Build(registries.Inputs{ImageConfig: img})
	if err != nil {
		t.Fatal(err)
	}
	store := registries.NewStore(t.TempDir())
	if _, err := store.Update(gen); err != nil {
		t.Fatal(err)
	}
	startControllerOptions(t, h.ns, testConfig(nil), nil, buildcontroller.Options{Registries: store})
	b := h.buildObj("app", amd64, arm64)
	// A base the controller sees is checked by the controller itself.
	b.Spec.Source.Dockerfile = ptr.To("FROM registry.example.com/base:v1\n")
	h.create(b)
	pods := h.waitPodNames(h.withManifestListPod([]string{h.platformPod(amd64), h.platformPod(arm64)})...)
	for _, p := range []string{amd64, arm64} {
		var got string
		for _, e := range pods[h.platformPod(p)].Spec.Containers[0].Env {
			if e.Name == buildv1.AllowedRegistriesEnv {
				got = e.Value
			}
		}
		if want := strings.Join(img.Spec.RegistrySources.AllowedRegistries, ","); got != want {
			t.Errorf("%s's pod: $%s = %q, want %q", p, buildv1.AllowedRegistriesEnv, got, want)
		}
	}
}
