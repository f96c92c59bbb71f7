package images

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/manifest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/test/bed"
)

// releaseImages are the images make images pushes and the release overlay
// pins.
var releaseImages = []string{"build-controller", "builder", "emulation-setup"}

// TestReleaseManifests runs make release-manifests' program against
// indexes pushed to the bed's registry (copies of the bed's five-platform
// base index under archway's three image names, so that it runs in
// seconds; TestMakeImages runs it on the images make images built) and
// checks the overlays it writes: kustomize build leaves no image by tag,
// each image is its pushed index's digest (the custom-builder mode's
// policy admits the builder's), and all pass a server-side
// dry run on the bed. Bad input gives a clear error and writes nothing.
func TestReleaseManifests(t *testing.T) {
	ctx := t.Context()
	registry := testBed.Registry.Host + "/release"
	// Three different indexes, so that a digest given to the wrong image
	// shows: the base's, the base without arm/v7, the base in Docker's
	// manifest formats.
	copyIndex(t, testBed.BaseImage, registry+"/build-controller:v1", nil)
	copyIndex(t, testBed.BaseImage, registry+"/builder:v1", func(o *copy.Options) {
		o.ImageListSelection = copy.CopySpecificImages
		o.InstancePlatforms = fourPlatforms()
		o.SparseManifestListAction = copy.StripSparseManifestList
		o.PreserveDigests = false
	})
	copyIndex(t, testBed.BaseImage, registry+"/emulation-setup:v1", func(o *copy.Options) {
		o.ForceManifestMIMEType = manifest.DockerV2Schema2MediaType
		o.PreserveDigests = false
	})
	gen := releaseManifestsProgram(t)
	out := filepath.Join(t.TempDir(), "release")
	if msg, err := runRelease(ctx, gen, registry, "v1", out); err != nil {
		t.Fatalf("release-manifests: %v\n%s", err, msg)
	}
	checkRelease(t, registry, "v1", out)
	k, _ := os.ReadFile(filepath.Join(out, "kustomization.yaml"))
	t.Logf("%s/kustomization.yaml:\n%s", out, k)

	t.Run("cert-manager, openshift and openshift/placement", func(t *testing.T) {
		for _, base := range []string{"cert-manager", "openshift", "openshift/placement"} {
			dir := filepath.Join(t.TempDir(), "release")
			if msg, err := runRelease(ctx, gen, registry, "v1", dir, "--base", base); err != nil {
				t.Fatalf("release-manifests --base %s: %v\n%s", base, err, msg)
			}
			checkRelease(t, registry, "v1", dir)
		}
	})

	t.Run("bad input writes nothing", func(t *testing.T) {
		// A single image where an index belongs.
		if _, err := testBed.PushBasePlatform(ctx, testBed.Registry, testBed.Registry.Host+"/single/builder:v1", "linux/amd64"); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"build-controller", "emulation-setup"} {
			copyIndex(t, testBed.BaseImage, testBed.Registry.Host+"/single/"+name+":v1", nil)
		}
		before := snapshot(t, out)
		for _, c := range []struct {
			name, registry, tag string
			extra               []string
			want                string
		}{
			{"missing image", testBed.Registry.Host + "/nothing", "v1", nil, testBed.Registry.Host + "/nothing/build-controller:v1"},
			{"missing tag", registry, "v2", nil, registry + "/build-controller:v2"},
			{"single image", testBed.Registry.Host + "/single", "v1", nil, "is a single image"},
			{"platform missing", registry, "v1", []string{"--platforms", "linux/amd64,linux/riscv64"}, "has no image for linux/riscv64"},
			{"bad tag", registry, "v1:x", nil, "is not a valid image tag"},
			{"no registry", "", "v1", nil, "--registry is required"},
			{"not an install", registry, "v1", []string{"--base", "crd"}, "is not an install"},
			{"not in manifests", registry, "v1", []string{"--base", "../test"}, "is not a directory of manifests/"},
		} {
			t.Run(c.name, func(t *testing.T) {
				for _, dir := range []string{out, filepath.Join(t.TempDir(), "new")} {
					msg, err := runRelease(ctx, gen, c.registry, c.tag, dir, c.extra...)
					if err == nil {
						t.Fatalf("release-manifests succeeded:\n%s", msg)
					}
					if dir == out {
						t.Logf("%s", msg)
					}
					if !strings.Contains(msg, c.want) {
						t.Errorf("the error does not say %q:\n%s", c.want, msg)
					}
					if dir == out {
						if after := snapshot(t, out); !maps.Equal(before, after) {
							t.Errorf("%s changed", out)
						}
					} else if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s was written: %v", dir, err)
					}
					parent, _ := os.ReadDir(filepath.Dir(dir))
					for _, e := range parent {
						if strings.HasPrefix(e.Name(), ".") {
							t.Errorf("left behind: %s", e.Name())
						}
					}
				}
			})
		}
		// A directory the program did not write is never replaced.
		mine := t.TempDir()
		if err := os.WriteFile(filepath.Join(mine, "kustomization.yaml"), []byte("resources: []\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		msg, err := runRelease(ctx, gen, registry, "v1", mine)
		if err == nil || !strings.Contains(msg, "was not written by release-manifests") {
			t.Errorf("release-manifests replaced %s: %v\n%s", mine, err, msg)
		}
		if data, _ := os.ReadFile(filepath.Join(mine, "kustomization.yaml")); string(data) != "resources: []\n" {
			t.Errorf("%s changed: %s", mine, data)
		}
	})
}

// releaseManifestsProgram builds hack/release-manifests.
func releaseManifestsProgram(t *testing.T) string {
	t.Helper()
	bin, err := bed.GoBuild(t.Context(), t.TempDir(), "./hack/release-manifests")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// runRelease runs the program as make release-manifests does, with the
// bed registry's access, and returns its output.
func runRelease(ctx context.Context, bin, registry, tag, out string, extra ...string) (string, error) {
	args := []string{"--registry", registry, "--tag", tag, "--out", out,
		"--manifests", filepath.Join(bed.RepoRoot(), "manifests"), "--tls-verify=false"}
	if testBed.Registry.Username != "" {
		auth, err := testBed.Registry.AuthFile(filepath.Dir(out))
		if err != nil {
			return "", err
		}
		args = append(args, "--authfile", auth)
	}
	cmd := exec.CommandContext(ctx, bin, append(args, extra...)...)
	cmd.Dir = bed.RepoRoot()
	msg, err := cmd.CombinedOutput()
	return string(msg), err
}

// checkRelease checks the overlays in out against the indexes pushed as
// registry/<image>:tag: kustomize builds each, every container image, the
// configuration's builder image and the custom-builder mode's admitted
// image is repository@digest of its index, and the apiserver accepts each
// in a server-side dry run.
func checkRelease(t *testing.T, registry, tag, out string) {
	t.Helper()
	ctx := t.Context()
	// The kinds of the overlays (openshift's and openshift-builds' SCCs
	// among them), served as for TestManifestsDryRun.
	if err := testBed.ServeOverlayKinds(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	digests := map[string]bool{}
	for _, name := range releaseImages {
		d, err := testBed.Registry.ManifestDigest(ctx, strings.TrimPrefix(registry, testBed.Registry.Host+"/")+"/"+name, tag)
		if err != nil {
			t.Fatal(err)
		}
		want[name] = registry + "/" + name + "@" + d
		digests[d] = true
	}
	if len(digests) != len(releaseImages) {
		t.Fatalf("some images are the same index: %v", want)
	}
	kubectl, err := bed.Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	// A dry run creates nothing: the namespaces must exist for the objects
	// in them to be checked (the bed serves archway's CRDs).
	for _, name := range []string{"archway-system", "archway-emulation"} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := testBed.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		dir  string
		want []string
	}{
		{out, []string{want["build-controller"], want["builder"]}},
		{filepath.Join(out, "emulation"), []string{want["emulation-setup"]}},
		// The custom-builder mode admits the release's builder, through
		// the release's build-controller.
		{filepath.Join(out, "openshift-builds"), []string{want["build-controller"], want["builder"]}},
	} {
		built, err := exec.CommandContext(ctx, kubectl, "kustomize", c.dir).Output()
		if err != nil {
			t.Fatalf("kubectl kustomize %s: %v", c.dir, stderr(err))
		}
		got := imagesOf(t, built)
		if len(got) == 0 {
			t.Fatalf("%s holds no image", c.dir)
		}
		for where, image := range got {
			if !slices.Contains(c.want, image) {
				t.Errorf("%s: %s: image %s is not one of the pushed indexes by digest %v", c.dir, where, image, c.want)
			}
		}
		for _, w := range c.want {
			if !slices.Contains(slices.Collect(maps.Values(got)), w) {
				t.Errorf("%s does not use %s", c.dir, w)
			}
		}
		t.Logf("%s: %d images, all pinned: %v", c.dir, len(got), c.want)

		apply := exec.CommandContext(ctx, kubectl, "--kubeconfig", testBed.Kubeconfig, "apply", "--dry-run=server", "--server-side",
			"--field-manager=release-test", "-f", "-")
		apply.Stdin = bytes.NewReader(built)
		if msg, err := apply.CombinedOutput(); err != nil || !strings.Contains(string(msg), "(server dry run)") {
			t.Errorf("server-side dry run of %s: %v\n%s", c.dir, err, msg)
		}
	}
}

// imagesOf returns every container image of a YAML stream, and the
// builder images of build-controller's configuration file, by where they
// are.
func imagesOf(t *testing.T, data []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		if u.Object == nil {
			continue
		}
		where := u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
		for _, path := range [][]string{{"spec", "template", "spec"}, {"spec"}} {
			spec, ok, _ := unstructured.NestedMap(u.Object, path...)
			if !ok {
				continue
			}
			for _, field := range []string{"initContainers", "containers"} {
				cs, _, _ := unstructured.NestedSlice(spec, field)
				for _, c := range cs {
					m, _ := c.(map[string]any)
					if image, _ := m["image"].(string); image != "" {
						out[where+" "+field+" "+m["name"].(string)] = image
					}
				}
			}
		}
		if u.GetKind() == "ConfigMap" && u.GetName() == "archway-custom-builder" {
			image, _, _ := unstructured.NestedString(u.Object, "data", "image")
			out[where+" image"] = image
		}
		if u.GetKind() == "ConfigMap" {
			if text, ok, _ := unstructured.NestedString(u.Object, "data", "config.yaml"); ok {
				cfg, err := configv1alpha1.Parse([]byte(text))
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				out[where+" builderImage"] = cfg.Build.BuilderImage
				for _, p := range cfg.Build.PlatformBuilderImages {
					out[where+" platformBuilderImages "+p.Platform] = p.Image
				}
			}
		}
	}
}

// copyIndex pushes the whole index src (a bed registry reference) as dst,
// with the copy's options changed by edit when it is not nil.
func copyIndex(t *testing.T, src, dst string, edit func(*copy.Options)) {
	t.Helper()
	if err := testBed.Registry.CopyIndex(t.Context(), src, dst, edit); err != nil {
		t.Fatal(err)
	}
}

// fourPlatforms are the platforms make images builds by default.
func fourPlatforms() []copy.InstancePlatformFilter {
	var out []copy.InstancePlatformFilter
	for _, p := range platforms {
		out = append(out, copy.InstancePlatformFilter{OS: p.os, Architecture: p.arch})
	}
	return out
}

// snapshot reads every file under dir.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		out[path] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func stderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return err.Error() + ": " + string(ee.Stderr)
	}
	return err.Error()
}
