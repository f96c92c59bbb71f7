package v1_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
)

// The tests in this file check the generated CRDs without an apiserver:
// that the apiserver would accept them (CEL rules compile and fit the cost
// budget), and that the CEL rules decide as package platform does. The
// integration tests in test/integration/api check the same rules on a real
// apiserver, message by message.

const crdDir = "../../../../manifests/crd/bases"

func loadCRD(t *testing.T, file string) (*apiextensionsv1.CustomResourceDefinition, *apiextensions.CustomResourceDefinition) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(crdDir, file))
	if err != nil {
		t.Fatalf("reading the generated CRD (run make generate): %v", err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return crd, internal
}

func TestCRDsAreValid(t *testing.T) {
	for _, file := range []string{"build.openshift.io_builds.yaml", "build.openshift.io_buildconfigs.yaml"} {
		t.Run(file, func(t *testing.T) {
			_, internal := loadCRD(t, file)
			errs := validation.ValidateCustomResourceDefinition(context.Background(), internal)
			if len(errs) > 0 {
				t.Fatalf("the apiserver would reject %s:\n%v", file, errs.ToAggregate())
			}
		})
	}
}

func TestPrinterColumns(t *testing.T) {
	cases := map[string][]string{
		"build.openshift.io_builds.yaml":       {"Type", "From", "Status", "Started", "Duration", "Platforms", "Reason"},
		"build.openshift.io_buildconfigs.yaml": {"Type", "From", "Latest"},
	}
	for file, want := range cases {
		t.Run(file, func(t *testing.T) {
			g := NewWithT(t)
			crd, _ := loadCRD(t, file)
			var got []string
			for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
				got = append(got, c.Name)
			}
			g.Expect(got).To(Equal(want))
			g.Expect(crd.Spec.Versions[0].Subresources).NotTo(BeNil())
			g.Expect(crd.Spec.Versions[0].Subresources.Status).NotTo(BeNil())
		})
	}
}

// celValidator evaluates the CEL rules of a CRD's schema on objects.
type celValidator struct {
	schema    *structuralschema.Structural
	validator *cel.Validator
}

func newCELValidator(t *testing.T, file string) *celValidator {
	t.Helper()
	_, internal := loadCRD(t, file)
	// With one version, the internal form keeps the schema at the top.
	s, err := structuralschema.NewStructural(internal.Spec.Validation.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	return &celValidator{schema: s, validator: cel.NewValidator(s, true, celconfig.PerCallLimit)}
}

// errors returns the CEL rule errors of obj (an update from old when old is
// not nil), as the apiserver prints them.
func (v *celValidator) errors(obj, old map[string]any) []string {
	var oldObj any
	if old != nil {
		oldObj = old
	}
	errs, _ := v.validator.Validate(context.Background(), nil, v.schema, obj, oldObj, celconfig.RuntimeCELCostBudget)
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func buildWithPlatforms(platforms, allowedToFail []string) map[string]any {
	spec := map[string]any{"strategy": map[string]any{"type": "Docker"}}
	if platforms != nil {
		spec["platforms"] = toAnySlice(platforms)
	}
	if allowedToFail != nil {
		spec["platformsAllowedToFail"] = toAnySlice(allowedToFail)
	}
	return map[string]any{"apiVersion": "build.openshift.io/v1", "kind": "Build", "spec": spec}
}

func toAnySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func TestPlatformRules(t *testing.T) {
	cases := []struct {
		name          string
		platforms     []string
		allowedToFail []string
		want          []string
	}{
		{name: "valid", platforms: []string{"linux/amd64", "linux/arm64", "linux/arm/v7", "windows/amd64"}, allowedToFail: []string{"linux/arm/v7"}},
		{name: "unset"},
		{name: "allowed to fail without platforms", allowedToFail: []string{"linux/s390x"}},
		{name: "os only", platforms: []string{"linux/amd64", "linux/arm64", "linux"},
			want: []string{`spec.platforms[2]: Invalid value: "linux": "linux" is not os/arch or os/arch/variant (e.g. linux/arm64)`}},
		{name: "too many parts", platforms: []string{"linux/arm/v7/x"},
			want: []string{`spec.platforms[0]: Invalid value: "linux/arm/v7/x": "linux/arm/v7/x" is not os/arch or os/arch/variant (e.g. linux/arm64)`}},
		{name: "empty part", platforms: []string{"linux//v7"},
			want: []string{`spec.platforms[0]: Invalid value: "linux//v7": "linux//v7" is not os/arch or os/arch/variant (e.g. linux/arm64)`}},
		{name: "uppercase", platforms: []string{"Linux/ARM64"},
			want: []string{`spec.platforms[0]: Invalid value: "Linux/ARM64": "Linux/ARM64": use lowercase ("linux/arm64")`}},
		{name: "spaces", platforms: []string{"linux/ arm64"},
			want: []string{`spec.platforms[0]: Invalid value: "linux/ arm64": "linux/ arm64": remove the spaces ("linux/arm64")`}},
		{name: "bad allowed-to-fail entry", platforms: []string{"linux/amd64"}, allowedToFail: []string{"amd64"},
			want: []string{
				`spec.platformsAllowedToFail[0]: Invalid value: "amd64": "amd64" is not os/arch or os/arch/variant (e.g. linux/arm64)`,
				`spec.platformsAllowedToFail: Invalid value: "amd64" is not in platforms; platformsAllowedToFail must be a subset of platforms`,
			}},
		{name: "exact duplicate", platforms: []string{"linux/amd64", "linux/arm64", "linux/amd64"},
			want: []string{`spec.platforms: Invalid value: "linux/amd64" is listed twice; remove one of them`}},
		{name: "duplicate after normalization", platforms: []string{"linux/arm64", "linux/amd64", "linux/arm64/v8"},
			want: []string{`spec.platforms: Invalid value: "linux/arm64/v8" is the same platform as "linux/arm64"; remove one of them`}},
		{name: "first of two duplicate groups", platforms: []string{"linux/amd64/v1", "linux/arm", "linux/amd64", "linux/arm/v7"},
			want: []string{`spec.platforms: Invalid value: "linux/amd64/v1" and other platforms are listed more than once (compared normalized, linux/arm64 = linux/arm64/v8); list each platform once`}},
		{name: "not a subset", platforms: []string{"linux/amd64", "linux/arm64"}, allowedToFail: []string{"linux/arm64/v8", "linux/s390x"},
			want: []string{`spec.platformsAllowedToFail: Invalid value: "linux/s390x" is not in platforms; platformsAllowedToFail must be a subset of platforms`}},
	}
	for _, file := range []string{"build.openshift.io_builds.yaml", "build.openshift.io_buildconfigs.yaml"} {
		v := newCELValidator(t, file)
		for _, tc := range cases {
			t.Run(file+"/"+tc.name, func(t *testing.T) {
				g := NewWithT(t)
				g.Expect(v.errors(buildWithPlatforms(tc.platforms, tc.allowedToFail), nil)).To(ConsistOf(tc.want))
			})
		}
	}
}

// samplePlatforms are spellings of platforms with and without their
// architecture's implied variant.
var samplePlatforms = []string{
	"linux/amd64", "linux/amd64/v1", "linux/amd64/v2", "linux/amd64/v3",
	"linux/arm64", "linux/arm64/v8", "linux/arm64/v8.0", "linux/arm64/v8.2", "linux/arm64/v9", "linux/arm64/v9.0",
	"linux/arm", "linux/arm/v7", "linux/arm/v6", "linux/arm/v8",
	"linux/ppc64le", "linux/ppc64le/power8", "linux/ppc64le/power9", "linux/ppc64", "linux/ppc64/power8",
	"linux/riscv64", "linux/riscv64/rva20u64", "linux/riscv64/rva22u64",
	"linux/s390x", "linux/386", "windows/amd64", "windows/arm64/v8", "freebsd/arm64",
}

// TestPlatformEquivalenceMatchesPackage checks that the CEL rules find two
// spellings the same platform exactly when package platform does, so
// admission and the controller agree.
func TestPlatformEquivalenceMatchesPackage(t *testing.T) {
	v := newCELValidator(t, "build.openshift.io_builds.yaml")
	for _, a := range samplePlatforms {
		for _, b := range samplePlatforms {
			pa, err := platform.Parse(a)
			if err != nil {
				t.Fatalf("sample %q: %v", a, err)
			}
			pb, err := platform.Parse(b)
			if err != nil {
				t.Fatalf("sample %q: %v", b, err)
			}
			same := pa.Key() == pb.Key()

			dupErrs := v.errors(buildWithPlatforms([]string{a, b}, nil), nil)
			if celSame := len(dupErrs) > 0; celSame != same {
				t.Errorf("platforms [%q %q]: CEL says duplicate=%v, package platform says %v (%v)", a, b, celSame, same, dupErrs)
			}
			subsetErrs := v.errors(buildWithPlatforms([]string{a}, []string{b}), nil)
			if celSubset := len(subsetErrs) == 0; celSubset != same {
				t.Errorf("platforms [%q], allowed to fail [%q]: CEL says subset=%v, package platform says %v (%v)", a, b, celSubset, same, subsetErrs)
			}
		}
	}
}

// jsonFields returns the JSON names of t's fields, with inline structs'
// fields in place of the struct.
func jsonFields(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" && strings.Contains(opts, "inline") {
			names = append(names, jsonFields(f.Type)...)
			continue
		}
		names = append(names, name)
	}
	return names
}

// TestImmutabilityRuleCoversEveryField fails when a field is added to
// BuildSpec (or CommonSpec, or BuildOutput) without adding it to the rule
// that keeps a Build's spec from changing.
func TestImmutabilityRuleCoversEveryField(t *testing.T) {
	g := NewWithT(t)
	crd, _ := loadCRD(t, "build.openshift.io_builds.yaml")
	var rule string
	for _, r := range crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].XValidations {
		if strings.HasPrefix(r.Message, "spec is immutable") {
			rule = r.Rule
		}
	}
	g.Expect(rule).NotTo(BeEmpty(), "the spec immutability rule is missing")
	for _, name := range jsonFields(reflect.TypeOf(buildv1.BuildSpec{})) {
		if name == "output" {
			continue
		}
		g.Expect(rule).To(ContainSubstring("self."+name+" == oldSelf."+name), "spec.%s", name)
	}
	for _, name := range jsonFields(reflect.TypeOf(buildv1.BuildOutput{})) {
		if name == "pushSecret" {
			continue // OpenShift lets it change
		}
		g.Expect(rule).To(ContainSubstring("self.output."+name+" == oldSelf.output."+name), "spec.output.%s", name)
	}
}

func TestBuildSpecImmutability(t *testing.T) {
	v := newCELValidator(t, "build.openshift.io_builds.yaml")
	const msg = `spec: Invalid value: spec is immutable once the Build exists; only spec.revision may be set (once) and spec.output.pushSecret may change`
	base := func() map[string]any {
		return map[string]any{"spec": map[string]any{
			"strategy": map[string]any{"type": "Docker"},
			"source":   map[string]any{"type": "Git", "git": map[string]any{"uri": "https://example.com/app.git"}},
			"output": map[string]any{
				"to":         map[string]any{"kind": "DockerImage", "name": "registry.example.com/app:latest"},
				"pushSecret": map[string]any{"name": "push"},
			},
			"platforms": []any{"linux/amd64", "linux/arm64"},
		}}
	}
	revision := map[string]any{"type": "Git", "git": map[string]any{"commit": "abc123"}}
	cases := []struct {
		name   string
		old    func(spec map[string]any)
		change func(spec map[string]any)
		want   []string
	}{
		{name: "no change", change: func(map[string]any) {}},
		{name: "set revision once", change: func(s map[string]any) { s["revision"] = revision }},
		{name: "change push secret", change: func(s map[string]any) { s["output"].(map[string]any)["pushSecret"] = map[string]any{"name": "other"} }},
		{name: "change revision", old: func(s map[string]any) { s["revision"] = revision },
			change: func(s map[string]any) {
				s["revision"] = map[string]any{"type": "Git", "git": map[string]any{"commit": "def456"}}
			}, want: []string{msg}},
		{name: "remove revision", old: func(s map[string]any) { s["revision"] = revision },
			change: func(s map[string]any) { delete(s, "revision") }, want: []string{msg}},
		{name: "add a platform", change: func(s map[string]any) { s["platforms"] = []any{"linux/amd64", "linux/arm64", "linux/s390x"} }, want: []string{msg}},
		{name: "set platforms", old: func(s map[string]any) { delete(s, "platforms") },
			change: func(s map[string]any) { s["platforms"] = []any{"linux/amd64"} }, want: []string{msg}},
		{name: "change output", change: func(s map[string]any) {
			s["output"].(map[string]any)["to"] = map[string]any{"kind": "DockerImage", "name": "registry.example.com/app:v2"}
		}, want: []string{msg}},
		{name: "change source", change: func(s map[string]any) { s["source"].(map[string]any)["contextDir"] = "sub" }, want: []string{msg}},
		{name: "set service account", change: func(s map[string]any) { s["serviceAccount"] = "builder2" }, want: []string{msg}},
		{name: "set node selector", change: func(s map[string]any) { s["nodeSelector"] = map[string]any{} }, want: []string{msg}},
		{name: "set deadline", change: func(s map[string]any) { s["completionDeadlineSeconds"] = int64(60) }, want: []string{msg}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			old, updated := base(), base()
			if tc.old != nil {
				tc.old(old["spec"].(map[string]any))
				tc.old(updated["spec"].(map[string]any))
			}
			tc.change(updated["spec"].(map[string]any))
			g.Expect(v.errors(updated, old)).To(ConsistOf(tc.want))
		})
	}
}

// TestLayerCacheRules checks the layer cache's CEL rules against
// platform.CacheRepository, which the builder applies: what admission
// accepts the builder takes, and what it refuses says why. (The mode's enum
// is the apiserver's schema check, not CEL.)
func TestLayerCacheRules(t *testing.T) {
	withCache := func(cache map[string]any) map[string]any {
		return map[string]any{"apiVersion": "build.openshift.io/v1", "kind": "Build", "spec": map[string]any{
			"strategy": map[string]any{"type": "Docker", "dockerStrategy": map[string]any{"layerCache": cache}}}}
	}
	const path = "spec.strategy.dockerStrategy.layerCache"
	digested := "registry.example.com/team/app@sha256:" + strings.Repeat("a", 64)
	cases := []struct {
		cache map[string]any
		want  []string
	}{
		{cache: map[string]any{"mode": "Registry"}},
		{cache: map[string]any{"mode": "Disabled"}},
		{cache: map[string]any{"mode": "Registry", "repository": "registry.example.com/team/app-cache"}},
		{cache: map[string]any{"repository": "127.0.0.1:5000/app"}},
		{cache: map[string]any{"repository": "team/app__cache"}},
		{cache: map[string]any{"repository": "registry.example.com/team/app:v1"},
			want: []string{path + `.repository: Invalid value: "registry.example.com/team/app:v1": "registry.example.com/team/app:v1" names a tag or digest: name the repository only, e.g. registry.example.com/team/app-cache`}},
		{cache: map[string]any{"repository": digested},
			want: []string{path + `.repository: Invalid value: "` + digested + `": "` + digested + `" names a tag or digest: name the repository only, e.g. registry.example.com/team/app-cache`}},
		{cache: map[string]any{"repository": "registry.example.com/Team/app"},
			want: []string{path + `.repository: Invalid value: "registry.example.com/Team/app": "registry.example.com/Team/app" is not a repository name, e.g. registry.example.com/team/app-cache (lowercase path components)`}},
		{cache: map[string]any{"repository": "registry.example.com/team/app --x"},
			want: []string{path + `.repository: Invalid value: "registry.example.com/team/app --x": "registry.example.com/team/app --x" is not a repository name, e.g. registry.example.com/team/app-cache (lowercase path components)`}},
	}
	for _, file := range []string{"build.openshift.io_builds.yaml", "build.openshift.io_buildconfigs.yaml"} {
		v := newCELValidator(t, file)
		for _, tc := range cases {
			g := NewWithT(t)
			errs := v.errors(withCache(tc.cache), nil)
			g.Expect(errs).To(ConsistOf(tc.want), "%s: %v", file, tc.cache)
			if repo, ok := tc.cache["repository"].(string); ok {
				_, err := platform.CacheRepository(repo, "linux/amd64")
				g.Expect(err == nil).To(Equal(len(errs) == 0), "admission and the builder agree on %q: %v", repo, err)
			}
		}
	}
}
