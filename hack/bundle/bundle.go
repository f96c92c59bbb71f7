package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	validationerrors "github.com/operator-framework/api/pkg/validation/errors"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/archway-build/archway/hack/internal/outdir"
	"github.com/archway-build/archway/hack/releaselist"
)

// Options are the generator's inputs.
type Options struct {
	// Install is the install kustomization (manifests/default, or the
	// release's pinned overlay); CRDs is manifests/crd.
	Install, CRDs string
	// Examples are files or directories of YAML (searched for *.yaml)
	// holding example objects of the owned kinds.
	Examples []string
	// Out is the directory written: manifests/, metadata/,
	// bundle.Dockerfile and cluster.yaml. It is replaced as a whole.
	Out string
	// Version is the release, vX.Y.Z (semver with a leading v).
	Version string
	// Releases is the list of releases (hack/releases): the CSV replaces
	// and skips the ones before Version.
	Releases string
	Meta     Meta
}

// versionPattern is a release version: v and a semantic version.
var versionPattern = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$`)

// ParseVersion reads vX.Y.Z[-pre][+build].
func ParseVersion(v string) (semver.Version, error) {
	if !versionPattern.MatchString(v) {
		return semver.Version{}, fmt.Errorf("version %q is not v and a semantic version (e.g. v0.1.0, v1.2.3-rc.1)", v)
	}
	return semver.Parse(strings.TrimPrefix(v, "v"))
}

// Result is what Generate wrote.
type Result struct {
	Bundle *Bundle
	// Files are the paths written, relative to Out.
	Files []string
	// Warnings are the validation library's warnings.
	Warnings []string
}

// Generate builds the install and the CRDs with kustomize, assembles the
// bundle, writes it to a new directory beside opts.Out, validates it
// there with the operator-framework validation library and only then
// puts it at opts.Out. On any error nothing is written.
func Generate(opts Options) (*Result, error) {
	v, err := ParseVersion(opts.Version)
	if err != nil {
		return nil, err
	}
	opts.Meta.Version = v
	releases, err := releaselist.Read(opts.Releases)
	if err != nil {
		return nil, fmt.Errorf("--releases: %w", err)
	}
	var earlier []semver.Version
	for _, r := range releaselist.Before(releases, v) {
		earlier = append(earlier, r.Version)
	}
	opts.Meta.Earlier = earlier
	objs, err := build(opts.Install)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", opts.Install, err)
	}
	crdObjs, err := build(opts.CRDs)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", opts.CRDs, err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, u := range crdObjs {
		if u.GetKind() != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s holds %s: only CRDs belong there", opts.CRDs, describe(u))
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := fromUnstructured(u, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", describe(u), err)
		}
		crds = append(crds, crd)
	}
	var examples []*unstructured.Unstructured
	for _, path := range opts.Examples {
		e, err := readExamples(path)
		if err != nil {
			return nil, err
		}
		examples = append(examples, e...)
	}
	ns := ""
	for _, u := range objs {
		if u.GetKind() == "Deployment" {
			ns = u.GetNamespace()
			break
		}
	}
	b, err := Assemble(Input{Namespace: ns, Objects: objs, CRDs: crds, Examples: examples}, opts.Meta)
	if err != nil {
		return nil, err
	}
	files, err := render(b, opts.Meta)
	if err != nil {
		return nil, err
	}

	out, err := filepath.Abs(opts.Out)
	if err != nil {
		return nil, err
	}
	if err := replaceable(out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, err
	}
	// Not a hidden name: OLM's loader skips hidden directories.
	tmp, err := os.MkdirTemp(filepath.Dir(out), filepath.Base(out)+".tmp-*")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	res := &Result{Bundle: b}
	for _, name := range sortedKeys(files) {
		path := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return nil, err
		}
		res.Files = append(res.Files, name)
	}
	warnings, err := Validate(tmp)
	if err != nil {
		return nil, err
	}
	res.Warnings = warnings
	if err := os.Chmod(tmp, 0o755); err != nil { //nolint:gosec // a directory of public manifests
		return nil, err
	}
	if err := os.RemoveAll(out); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, err
	}
	return res, nil
}

// Validate loads the bundle in dir as OLM's tools do and runs the
// operator-framework validators on it (the default bundle validators, and
// the ones for the objects it carries and for removed APIs). It returns
// the warnings, and an error listing every error.
func Validate(dir string) ([]string, error) {
	bundle, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		return nil, fmt.Errorf("loading the bundle %s: %w", dir, err)
	}
	validators := validation.DefaultBundleValidators.WithValidators(
		validation.ObjectValidator,
		validation.AlphaDeprecatedAPIsValidator,
	)
	results := validators.Validate(bundle.ObjectsToValidate()...)
	var errs, warnings []string
	for _, r := range results {
		for _, e := range r.Errors {
			errs = append(errs, describeResult(r, e))
		}
		for _, w := range r.Warnings {
			warnings = append(warnings, describeResult(r, w))
		}
	}
	sort.Strings(warnings)
	if len(errs) > 0 {
		return warnings, fmt.Errorf("the bundle is not valid:\n  %s", strings.Join(errs, "\n  "))
	}
	return warnings, nil
}

func describeResult(r validationerrors.ManifestResult, e validationerrors.Error) string {
	return fmt.Sprintf("%s %s: %s", r.Name, e.Type, e.Error())
}

// build runs kustomize on dir.
func build(dir string) ([]*unstructured.Unstructured, error) {
	o := krusty.MakeDefaultOptions()
	o.Reorder = krusty.ReorderOptionUnspecified
	m, err := krusty.MakeKustomizer(o).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, r := range m.Resources() {
		// As the apiserver reads it: integers as int64 (kustomize's
		// are int, which unstructured objects do not hold).
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		var obj map[string]any
		if err := utiljson.Unmarshal(data, &obj); err != nil {
			return nil, err
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out, nil
}

// readExamples reads every object of a YAML file, or of every *.yaml file
// under a directory.
func readExamples(path string) ([]*unstructured.Unstructured, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--examples: %w", err)
	}
	var files []string
	if st.IsDir() {
		err := filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
	} else {
		files = []string{path}
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if obj == nil {
				continue
			}
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
	return out, nil
}

// generatedMarker heads cluster.yaml: an output directory is replaced
// only when it has one.
const generatedMarker = "# Generated by hack/bundle"

// replaceable refuses an output directory this did not write.
func replaceable(out string) error {
	return outdir.Replaceable(out, "cluster.yaml", generatedMarker, "hack/bundle")
}

// render lays the bundle out as files: manifests/ (one object a file, as
// OLM reads them), metadata/annotations.yaml, bundle.Dockerfile (its
// context is the output directory) and cluster.yaml.
func render(b *Bundle, meta Meta) (map[string][]byte, error) {
	files := map[string][]byte{}
	put := func(name string, obj any) error {
		data, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		name = filepath.Join("manifests", name)
		if _, dup := files[name]; dup {
			return fmt.Errorf("two objects would be written to %s", name)
		}
		files[name] = data
		return nil
	}
	csv, err := toMap(b.CSV)
	if err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(csv, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(csv, "status")
	removeCreationTimestamps(csv)
	if err := put(meta.Package+".clusterserviceversion.yaml", csv); err != nil {
		return nil, err
	}
	for _, crd := range b.CRDs {
		u, err := toMap(crd)
		if err != nil {
			return nil, err
		}
		unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u, "status")
		if err := put(crd.Name+".crd.yaml", u); err != nil {
			return nil, err
		}
	}
	for _, u := range b.Extra {
		obj := u.DeepCopy()
		obj.SetNamespace("")
		name := strings.ToLower(u.GetName() + "." + u.GetKind() + ".yaml")
		name = strings.NewReplacer(":", "_", "/", "_").Replace(name)
		if err := put(name, obj.Object); err != nil {
			return nil, err
		}
	}

	annotations := map[string]any{"annotations": bundleLabels(meta)}
	data, err := yaml.Marshal(annotations)
	if err != nil {
		return nil, err
	}
	files[filepath.Join("metadata", "annotations.yaml")] = data

	var df strings.Builder
	df.WriteString("# The bundle image (" + generatedMarker[2:] + "): build it with this directory as the context.\nFROM scratch\n")
	labels := bundleLabels(meta)
	for _, k := range sortedKeys(labels) {
		fmt.Fprintf(&df, "LABEL %s=%s\n", k, labels[k])
	}
	df.WriteString("COPY manifests /manifests/\nCOPY metadata /metadata/\n")
	files["bundle.Dockerfile"] = []byte(df.String())

	var cluster bytes.Buffer
	fmt.Fprintf(&cluster, "%s %s: what OLM cannot install from the bundle, in\n", generatedMarker, meta.Version)
	cluster.WriteString("# the order to apply it, once OLM has installed the bundle's CRDs in\n")
	cluster.WriteString("# archway-system (the webhook components become ready only when their\n")
	cluster.WriteString("# configurations exist: they inject their CA into them):\n")
	cluster.WriteString("#   kubectl apply --server-side -f cluster.yaml\n")
	cluster.WriteString("# Why each object is here:\n")
	for _, n := range b.Notes {
		cluster.WriteString("# - " + n + "\n")
	}
	for _, u := range b.Cluster {
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		cluster.WriteString("---\n")
		cluster.Write(data)
	}
	files["cluster.yaml"] = cluster.Bytes()
	return files, nil
}

// toMap is obj as JSON reads it: its own marshalling (versions,
// quantities) kept.
func toMap(obj any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// removeCreationTimestamps drops the null creationTimestamp the typed
// Deployment specs' pod templates marshal to.
func removeCreationTimestamps(csv map[string]any) {
	deps, _, _ := unstructured.NestedSlice(csv, "spec", "install", "spec", "deployments")
	for _, d := range deps {
		if m, ok := d.(map[string]any); ok {
			unstructured.RemoveNestedField(m, "spec", "template", "metadata", "creationTimestamp")
		}
	}
	_ = unstructured.SetNestedSlice(csv, deps, "spec", "install", "spec", "deployments")
}

// bundleLabels are the registry+v1 annotations, also the bundle image's
// labels.
func bundleLabels(meta Meta) map[string]string {
	return map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         meta.Package,
		"operators.operatorframework.io.bundle.channels.v1":        meta.Channel,
		"operators.operatorframework.io.bundle.channel.default.v1": meta.Channel,
	}
}
