package cmd_test

import (
	"errors"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the import path every rule below is relative to.
const module = "github.com/archway-build/archway/"

// buildTags are the tags the Makefile builds every program with.
const buildTags = "containers_image_openpgp exclude_graphdriver_btrfs netgo osusergo libsqlite3"

// forbidden is one package a program must not link, with why. A path ending
// in "/..." forbids the package and everything under it; any other path
// forbids that package alone.
type forbidden struct{ path, why string }

// required is a package of this module a program must link, with why.
type required struct{ path, why string }

// TestProgramsLinkOnlyTheirOwnSide checks the import graph of each program
// (go list -deps with the release build tags): a program links only the
// packages of the side it runs on, so the builder carries no controller, the
// plugin no buildah and the controller no builder; and it links the shared
// packages it is meant to read (links), rather than a copy of their rules.
func TestProgramsLinkOnlyTheirOwnSide(t *testing.T) {
	tests := []struct {
		program string
		deny    []forbidden
		links   []required
	}{
		{"builder", []forbidden{
			{"pkg/build/controller/...", "the Build controller runs in build-controller, not in build pods"},
			{"pkg/build/buildconfig/...", "the BuildConfig controller runs in build-controller"},
			{"pkg/build/trigger/scm/...", "the SCM webhooks run in build-controller"},
			{"pkg/build/trigger/binary", "the binary-build endpoint runs in build-controller (its artifact format is shared)"},
			{"pkg/build/plugin/...", "the plugin runs on a user's machine"},
			{"pkg/placement/...", "placement runs in build-controller"},
			{"pkg/scheduling/...", "scheduling policy runs in build-controller"},
			{"sigs.k8s.io/controller-runtime/...", "controllers run in build-controller"},
		}, []required{{"pkg/build/dockerfile", "the builder's keys and base checks read the Dockerfile model"}}},
		{"kubectl-archway", []forbidden{
			{"go.podman.io/buildah/...", "the plugin is pure Go and cross-compiles for every platform"},
			{"pkg/build/controller/...", "the plugin talks to the API, not to the controller's code"},
			{"pkg/build/builder/...", "the builder runs in build pods"},
			{"pkg/placement/...", "placement runs in build-controller"},
			{"pkg/scheduling/...", "scheduling policy runs in build-controller"},
		}, nil},
		{"build-controller", []forbidden{
			{"pkg/build/builder/...", "the builder runs in build pods"},
			{"pkg/build/plugin/...", "the plugin runs on a user's machine"},
			{"go.podman.io/buildah/...", "only the builder builds images"},
			{"github.com/openshift/imagebuilder", "its shell lexer comes with a Docker client: the preflight reads Dockerfiles with pkg/build/dockerfile, expanding nothing"},
		}, []required{{"pkg/build/dockerfile", "the preflight reads the Dockerfile model, not rules of its own"}}},
	}
	for _, tt := range tests {
		t.Run(tt.program, func(t *testing.T) {
			imports := programImports(t, tt.program)
			for _, f := range tt.deny {
				// Report where the forbidden packages enter the program:
				// each import of one of them by a package that is not.
				for _, pkg := range slices.Sorted(maps.Keys(imports)) {
					if f.matches(pkg) {
						continue
					}
					for _, imp := range imports[pkg] {
						if f.matches(imp) {
							t.Errorf("cmd/%s links %s (imported by %s): %s", tt.program, imp, pkg, f.why)
						}
					}
				}
			}
			for _, r := range tt.links {
				if _, ok := imports[module+r.path]; !ok {
					t.Errorf("cmd/%s does not link %s: %s", tt.program, r.path, r.why)
				}
			}
		})
	}
}

// TestDockerfileModelStaysLight checks what the Dockerfile model links:
// both the builder and build-controller read Dockerfiles with it, so it
// must bring neither buildah nor a Docker client into the controller.
func TestDockerfileModelStaysLight(t *testing.T) {
	const pkg = "pkg/build/dockerfile"
	imports := packageImports(t, "../"+pkg, module+pkg)
	for _, f := range []forbidden{
		{"go.podman.io/buildah/...", "only the builder builds images"},
		{"go.podman.io/image/...", "registry access is the builder's and placement's, not the model's"},
		{"github.com/openshift/imagebuilder", "its shell lexer comes with a Docker client: the builder passes it in as an Expander"},
		{"github.com/fsouza/go-dockerclient/...", "no program talks to a Docker daemon"},
		{"pkg/build/builder/...", "the builder runs in build pods"},
		{"pkg/build/controller/...", "the Build controller runs in build-controller"},
	} {
		for _, p := range slices.Sorted(maps.Keys(imports)) {
			if f.matches(p) {
				continue
			}
			for _, imp := range imports[p] {
				if f.matches(imp) {
					t.Errorf("%s links %s (imported by %s): %s", pkg, imp, p, f.why)
				}
			}
		}
	}
}

// matches reports whether the import path dep is what f forbids: a path
// whose first element has no dot is this module's.
func (f forbidden) matches(dep string) bool {
	path := f.path
	if first, _, _ := strings.Cut(path, "/"); !strings.Contains(first, ".") {
		path = module + path
	}
	if prefix, ok := strings.CutSuffix(path, "/..."); ok {
		return dep == prefix || strings.HasPrefix(dep, prefix+"/")
	}
	return dep == path
}

// programImports lists every package cmd/<program> links, each with the
// packages it imports.
func programImports(t *testing.T, program string) map[string][]string {
	t.Helper()
	return packageImports(t, "./"+program, module+"cmd/"+program)
}

// packageImports lists every package the package at dir (importPath)
// links, each with the packages it imports.
func packageImports(t *testing.T, dir, importPath string) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-tags", buildTags,
		"-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, dir).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", dir, errText(err))
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	if _, ok := imports[importPath]; !ok {
		t.Fatalf("go list -deps %s did not list %s itself", dir, importPath)
	}
	return imports
}

func errText(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return err.Error() + ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return err.Error()
}
