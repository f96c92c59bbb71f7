package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
)

func testImages() map[string]Image {
	out := map[string]Image{}
	for i, name := range images {
		out[name] = Image{
			Name:   name,
			Tagged: "registry.example.com/archway/" + name + ":v1",
			Digest: digest.FromString(name + string(rune('0'+i))),
		}
	}
	return out
}

// repoManifests copies the repository's manifests/ into a new directory.
func repoManifests(t *testing.T) string {
	t.Helper()
	// go test runs a test in its package's directory (runtime.Caller
	// would name this file by its import path under -trimpath).
	src, err := filepath.Abs(filepath.Join("..", "..", "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "manifests")
	if out, err := exec.Command("cp", "-r", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	return dst
}

// renderTo renders the overlays into out.
func renderTo(t *testing.T, manifests, out string, imgs map[string]Image) {
	t.Helper()
	renderBase(t, manifests, "default", out, imgs)
}

// renderBase renders the overlays of the install base into out.
func renderBase(t *testing.T, manifests, base, out string, imgs map[string]Image) {
	t.Helper()
	files, err := render(manifests, base, out, "registry.example.com/archway", "v1", imgs)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		path := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func pinnedOf(imgs map[string]Image) []string {
	var out []string
	for _, img := range imgs {
		out = append(out, img.Pinned())
	}
	return out
}

// TestVerify builds the rendered overlays of the repository's manifests
// (every image pinned) and of a copy with one more container whose image
// the release does not know: verify refuses the second, naming it, and a
// copy whose base holds the CRDs.
func TestVerify(t *testing.T) {
	imgs := testImages()
	manifests := repoManifests(t)
	out := filepath.Join(t.TempDir(), "release")
	renderTo(t, manifests, out, imgs)
	for _, dir := range []string{out, filepath.Join(out, "emulation"), filepath.Join(out, openshiftBuilds)} {
		if err := verify(dir, pinnedOf(imgs)); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}

	// The other installs pin the same way.
	for _, base := range []string{"cert-manager", "openshift", "openshift/placement"} {
		dir := filepath.Join(t.TempDir(), "release-"+base)
		renderBase(t, manifests, base, dir, imgs)
		if err := verify(dir, pinnedOf(imgs)); err != nil {
			t.Errorf("--base %s: %v", base, err)
		}
	}
	// Anything but an install is refused.
	for _, base := range []string{"../manifests", "crd", "placement", "release", "release/openshift", "nothing", "", "/abs", "openshift/../default", "openshift/placement/crd", "openshift/registries"} {
		if _, err := render(manifests, base, filepath.Join(t.TempDir(), "x"), "r", "v1", imgs); err == nil {
			t.Errorf("--base %q: no error", base)
		}
	}

	dep := filepath.Join(manifests, "build-controller", "deployment.yaml")
	data, err := os.ReadFile(dep)
	if err != nil {
		t.Fatal(err)
	}
	const containers = "      containers:\n"
	if !strings.Contains(string(data), containers) {
		t.Fatalf("%s has no %q", dep, containers)
	}
	orig := data
	data = []byte(strings.Replace(string(data), containers, containers+"      - name: sidecar\n        image: quay.io/someone/sidecar:latest\n", 1))
	if err := os.WriteFile(dep, data, 0o600); err != nil {
		t.Fatal(err)
	}
	err = verify(out, pinnedOf(imgs))
	if err == nil || !strings.Contains(err.Error(), "quay.io/someone/sidecar:latest") {
		t.Errorf("verify with an unknown image: %v", err)
	}

	// CRDs in the base: deleting the release would delete them.
	if err := os.WriteFile(dep, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	def := filepath.Join(manifests, "default", "kustomization.yaml")
	data, err = os.ReadFile(def)
	if err != nil {
		t.Fatal(err)
	}
	const resources = "resources:\n"
	if !strings.Contains(string(data), resources) {
		t.Fatalf("%s has no %q", def, resources)
	}
	data = []byte(strings.Replace(string(data), resources, resources+"- ../crd\n", 1))
	if err := os.WriteFile(def, data, 0o600); err != nil {
		t.Fatal(err)
	}
	err = verify(out, pinnedOf(imgs))
	if err == nil || !strings.Contains(err.Error(), "CustomResourceDefinition") {
		t.Errorf("verify with the CRDs in the base: %v", err)
	}
}

// TestOpenShiftBuildsAdmitsTheBuilder checks the custom-builder mode's
// overlay: its policy's and webhook's ConfigMap names the release's
// builder by digest, the webhook runs the release's build-controller, the
// rest of manifests/openshift-builds as it is; verify refuses the overlay
// when the ConfigMap still names no image or another one.
func TestOpenShiftBuildsAdmitsTheBuilder(t *testing.T) {
	imgs := testImages()
	manifests := repoManifests(t)
	out := filepath.Join(t.TempDir(), "release")
	renderTo(t, manifests, out, imgs)
	dir := filepath.Join(out, openshiftBuilds)
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	configs := 0
	for _, r := range m.Resources() {
		kinds[r.GetKind()] = true
		if r.GetKind() != "ConfigMap" {
			continue
		}
		data := r.GetDataMap()
		if strings.HasPrefix(r.GetName(), "build-controller-config-") {
			// build-controller's configuration, which the custom pods
			// apply: the release's.
			configs++
			cfg, err := configv1alpha1.Parse([]byte(data["config.yaml"]))
			if err != nil || cfg.Build.BuilderImage != imgs["builder"].Pinned() {
				t.Errorf("ConfigMap %s: %v, builder %v; want the release's configuration", r.GetName(), err, cfg)
			}
			continue
		}
		if r.GetName() != customBuilderConfigMap || r.GetNamespace() != "archway-system" || data["image"] != imgs["builder"].Pinned() {
			t.Errorf("ConfigMap %s/%s data %v, want %s/%s image %s", r.GetNamespace(), r.GetName(), data,
				"archway-system", customBuilderConfigMap, imgs["builder"].Pinned())
		}
	}
	if configs != 1 {
		t.Errorf("%d ConfigMaps of build-controller's configuration, want 1", configs)
	}
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration", "Deployment", "ClusterRole", "ConfigMap"} {
		if !kinds[kind] {
			t.Errorf("the overlay has no %s (kinds %v)", kind, kinds)
		}
	}

	// The shipped ConfigMap alone names no image; another image is not
	// the release's.
	if err := verify(filepath.Join(manifests, openshiftBuilds), pinnedOf(imgs)); err == nil {
		t.Error("verify of manifests/openshift-builds (no image named): no error")
	}
	other := testImages()
	other["builder"] = Image{Name: "builder", Tagged: "quay.io/someone/builder:v1", Digest: digest.FromString("other")}
	dir2 := filepath.Join(t.TempDir(), "release")
	renderTo(t, manifests, dir2, other)
	err = verify(filepath.Join(dir2, openshiftBuilds), pinnedOf(imgs))
	if err == nil || !strings.Contains(err.Error(), other["builder"].Pinned()) {
		t.Errorf("verify with another builder: %v", err)
	}
}

// TestSetBuilderImage checks the configuration file keeps its comments and
// every other setting, with only build.builderImage changed.
func TestSetBuilderImage(t *testing.T) {
	in := `# a comment
apiVersion: config.archway.dev/v1alpha1
kind: BuildControllerConfiguration
build:
  # the builder
  builderImage: ghcr.io/archway-build/builder:latest
  builderServiceAccount: builder
`
	pinned := "registry.example.com/archway/builder@" + digest.FromString("x").String()
	out, err := setBuilderImage([]byte(in), pinned)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# a comment", "# the builder", "builderServiceAccount: builder", "builderImage: " + pinned} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	cfg, err := configv1alpha1.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Build.BuilderImage != pinned {
		t.Errorf("builderImage %q", cfg.Build.BuilderImage)
	}
	for _, bad := range []string{"build: {}\n", "kind: X\n", "build: [a]\n", "a: 1\n---\nb: 2\n"} {
		if _, err := setBuilderImage([]byte(bad), pinned); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
