package plugin

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestInstallPlan(t *testing.T) {
	exists := func(dirs ...string) func(string) bool {
		return func(d string) bool { return slices.Contains(dirs, d) }
	}
	m := "manifests"
	for _, tt := range []struct {
		name         string
		opts         installOptions
		openshift    bool
		customMode   bool
		exists       func(string) bool
		overlay, crd string
	}{
		{"archway's Build API", installOptions{manifests: m}, false, false, exists(), "manifests/default", "manifests/crd"},
		{"OpenShift's", installOptions{manifests: m}, true, true, exists("manifests/openshift-builds/crd"), "manifests/openshift-builds", "manifests/openshift-builds/crd"},
		{"a release overlay", installOptions{manifests: m, overlay: "manifests/release"}, false, false, exists(), "manifests/release", "manifests/crd"},
		{"a release's custom-builder mode", installOptions{manifests: m, overlay: "manifests/release/openshift-builds"}, true, true, exists(),
			"manifests/release/openshift-builds", "manifests/openshift-builds/crd"},
		{"an overlay with its CRDs", installOptions{manifests: m, overlay: "manifests/openshift/placement"}, true, false, exists("manifests/openshift/placement/crd"),
			"manifests/openshift/placement", "manifests/openshift/placement/crd"},
		// Refused then by checkInstall: manifests/crd holds the Build CRDs.
		{"archway's Build API where OpenShift's is", installOptions{manifests: m, overlay: "manifests/default"}, true, false, exists("manifests/openshift-builds/crd"),
			"manifests/default", "manifests/crd"},
		{"CRDs given", installOptions{manifests: m, crds: "x/crd"}, false, false, exists("manifests/default/crd"), "manifests/default", "x/crd"},
	} {
		overlay := installOverlay(tt.opts, tt.openshift)
		crd := installCRDs(tt.opts, overlay, tt.customMode, tt.exists)
		if overlay != tt.overlay || crd != tt.crd {
			t.Errorf("%s: overlay %s, CRDs %s; want %s, %s", tt.name, overlay, crd, tt.overlay, tt.crd)
		}
	}
}

// TestCheckInstall renders the repository's own kustomizations: the Build
// CRDs are refused where OpenShift serves build.openshift.io, the
// custom-builder mode where it does not, and each install fits its
// cluster.
func TestCheckInstall(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "manifests")
	rendered := map[string]int{}
	for _, tt := range []struct {
		kustomization string
		openshift     bool
		refuse        string // "" fits
	}{
		{"crd", false, ""},
		{"default", false, ""},
		{"crd", true, "holds CustomResourceDefinition builds.build.openshift.io, but OpenShift serves build.openshift.io"},
		{"openshift-builds/crd", true, ""},
		{"openshift-builds", true, ""},
		{"openshift/placement/crd", true, ""},
		{"openshift-builds", false, "is the custom-builder mode, but OpenShift does not serve build.openshift.io"},
		{"default", true, "runs archway's own Build API (Deployment archway-build-triggers runs build-controller's build, buildconfig, buildconfig-webhooks components), but OpenShift serves"},
		{"openshift", true, "Deployment build-controller runs build-controller's"},
		{"openshift/placement", true, ""},
	} {
		objs, err := render(filepath.Join(dir, tt.kustomization))
		if err != nil {
			t.Fatal(err)
		}
		rendered[tt.kustomization] = len(objs)
		if custom := isCustomBuilderMode(objs); custom != (tt.kustomization == "openshift-builds") {
			t.Errorf("%s: isCustomBuilderMode = %v", tt.kustomization, custom)
		}
		err = checkInstall(objs, tt.openshift, tt.kustomization)
		switch {
		case tt.refuse == "" && err != nil:
			t.Errorf("%s (OpenShift's build API: %v): refused: %v", tt.kustomization, tt.openshift, err)
		case tt.refuse != "" && (err == nil || !strings.Contains(err.Error(), tt.refuse)):
			t.Errorf("%s (OpenShift's build API: %v): %v, want refused with %q", tt.kustomization, tt.openshift, err, tt.refuse)
		}
	}
	t.Logf("objects rendered: %v", rendered)
}

func TestRenderNeedsAKustomization(t *testing.T) {
	_, err := render(filepath.Join(t.TempDir(), "manifests", "default"))
	if err == nil || !strings.Contains(err.Error(), "run kubectl archway install from a checkout of archway, or give its manifests directory with --manifests") {
		t.Errorf("render of a missing directory: %v", err)
	}
}

func TestCheckArchway(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "manifests")
	crds, err := render(filepath.Join(dir, "crd"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render(filepath.Join(dir, "default"))
	if err != nil {
		t.Fatal(err)
	}
	for _, install := range []string{"default", "openshift", "openshift/placement", "openshift-builds", "cert-manager"} {
		objs, err := render(filepath.Join(dir, install))
		if err != nil {
			t.Fatal(err)
		}
		if err := checkArchway(crds, objs, "crd", install); err != nil {
			t.Errorf("archway's install %s refused: %v", install, err)
		}
	}
	// Another project's manifests: no archway namespace, no CRDs alone.
	err = checkArchway(objs, crds, "default", "crd")
	for _, want := range []string{"--crds must be CRDs alone", "crd is not an install of archway (it has no Namespace archway-system)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checkArchway of swapped kustomizations: %v, want %q", err, want)
		}
	}
}
