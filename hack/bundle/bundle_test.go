package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/archway-build/archway/pkg/placement"
)

// repo is the repository's root: go test runs a test in its package's
// directory (runtime.Caller would name this file by its import path
// under -trimpath, as make builds).
func repo(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func repoOptions(t *testing.T, out string) Options {
	root := repo(t)
	return Options{
		Install:  filepath.Join(root, "manifests", "default"),
		CRDs:     filepath.Join(root, "manifests", "crd"),
		Examples: []string{filepath.Join(root, "examples"), filepath.Join(root, "hack", "bundle", "examples.yaml")},
		Out:      out,
		Version:  "v0.1.0",
		Releases: filepath.Join(root, "hack", "releases"),
		Meta: Meta{
			Package: "archway", Channel: "alpha", MinKubeVersion: "1.30.0",
			Platforms: []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"},
		},
	}
}

// generated generates the bundle of the repository's manifests once per
// test, as the first release.
func generated(t *testing.T) (string, *Result) {
	t.Helper()
	return generatedAs(t, "v0.1.0")
}

// generatedAs generates the bundle of the repository's manifests as the
// release version.
func generatedAs(t *testing.T, version string) (string, *Result) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bundle")
	opts := repoOptions(t, out)
	opts.Version = version
	start := time.Now()
	res, err := Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("generated and validated in %s", time.Since(start).Round(time.Millisecond))
	return out, res
}

// TestBundleValidates generates the bundle from the repository's
// manifests and validates what was written with the operator-framework
// validation library: any error fails.
func TestBundleValidates(t *testing.T) {
	out, res := generated(t)
	start := time.Now()
	warnings, err := Validate(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("validation alone: %s; %d warnings", time.Since(start).Round(time.Millisecond), len(warnings))
	// A warning is what OperatorHub's checks would flag: none.
	for _, w := range warnings {
		t.Error("warning:", w)
	}
	for _, n := range res.Bundle.Notes {
		t.Log("note:", n)
	}
	csv := res.Bundle.CSV
	modes := map[operatorsv1alpha1.InstallModeType]bool{}
	for _, m := range csv.Spec.InstallModes {
		modes[m.Type] = m.Supported
	}
	if !modes[operatorsv1alpha1.InstallModeTypeAllNamespaces] || modes[operatorsv1alpha1.InstallModeTypeOwnNamespace] ||
		modes[operatorsv1alpha1.InstallModeTypeSingleNamespace] || modes[operatorsv1alpha1.InstallModeTypeMultiNamespace] {
		t.Errorf("installModes %+v: want AllNamespaces only", csv.Spec.InstallModes)
	}
	if csv.Spec.MinKubeVersion == "" || csv.Spec.Version.String() != "0.1.0" || csv.Name != "archway.v0.1.0" {
		t.Errorf("name %s, version %s, minKubeVersion %q", csv.Name, csv.Spec.Version, csv.Spec.MinKubeVersion)
	}
	// The first release: nothing to update from.
	if skip, ok := csv.Annotations[operatorsv1alpha1.SkipRangeAnnotationKey]; ok || csv.Spec.Replaces != "" {
		t.Errorf("the first release replaces %q, skipRange %q: want neither", csv.Spec.Replaces, skip)
	}
	for _, f := range []string{"metadata/annotations.yaml", "bundle.Dockerfile", "cluster.yaml", "manifests/archway.clusterserviceversion.yaml"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
}

// rule is one permission: a verb on a resource (by name) of an API group,
// or on a non-resource URL.
type rule struct{ group, resource, name, verb, url string }

func expand(rules []rbacv1.PolicyRule) map[rule]bool {
	out := map[rule]bool{}
	for _, r := range rules {
		for _, v := range r.Verbs {
			for _, u := range r.NonResourceURLs {
				out[rule{verb: v, url: u}] = true
			}
			names := r.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, n := range names {
						out[rule{group: g, resource: res, name: n, verb: v}] = true
					}
				}
			}
		}
	}
	return out
}

// normalize is v as JSON reads it back, so that values decoded by
// different readers compare (numbers, empty fields).
func normalize(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func decode(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := fromUnstructured(u, into); err != nil {
		t.Fatalf("%s: %v", describe(u), err)
	}
}

// TestCSVHoldsEveryRule reads the install as the kustomize path applies
// it and checks, rule by rule, that the CSV grants each component's
// service account exactly what its bindings grant there: in the namespace
// (RoleBindings) and cluster-wide (ClusterRoleBindings). A rule, a role
// or a binding the generator loses, or one it invents, fails.
func TestCSVHoldsEveryRule(t *testing.T) {
	_, res := generated(t)
	objs, err := build(filepath.Join(repo(t), "manifests", "default"))
	if err != nil {
		t.Fatal(err)
	}
	accounts := map[string]bool{}
	roles := map[string][]rbacv1.PolicyRule{}
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			sa, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "serviceAccountName")
			accounts[sa] = true
		case "Role":
			r := &rbacv1.Role{}
			decode(t, u, r)
			roles["Role/"+r.Name] = r.Rules
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			decode(t, u, r)
			roles["ClusterRole/"+r.Name] = r.Rules
		}
	}
	want := map[string]map[rule]bool{} // "ns|sa" or "cluster|sa"
	add := func(scope, sa string, rules []rbacv1.PolicyRule) {
		key := scope + "|" + sa
		if want[key] == nil {
			want[key] = map[rule]bool{}
		}
		for r := range expand(rules) {
			want[key][r] = true
		}
	}
	for _, u := range objs {
		var subjects []rbacv1.Subject
		var ref rbacv1.RoleRef
		scope := "ns"
		switch u.GetKind() {
		case "RoleBinding":
			b := &rbacv1.RoleBinding{}
			decode(t, u, b)
			subjects, ref = b.Subjects, b.RoleRef
		case "ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			decode(t, u, b)
			subjects, ref, scope = b.Subjects, b.RoleRef, "cluster"
		default:
			continue
		}
		for _, s := range subjects {
			if s.Kind == "ServiceAccount" && accounts[s.Name] {
				add(scope, s.Name, roles[ref.Kind+"/"+ref.Name])
			}
		}
	}
	got := map[string]map[rule]bool{}
	strategy := res.Bundle.CSV.Spec.InstallStrategy.StrategySpec
	for scope, perms := range map[string][]operatorsv1alpha1.StrategyDeploymentPermissions{"ns": strategy.Permissions, "cluster": strategy.ClusterPermissions} {
		for _, p := range perms {
			got[scope+"|"+p.ServiceAccountName] = expand(p.Rules)
		}
	}
	for _, key := range sortedKeys(want) {
		var missing []string
		for r := range want[key] {
			if !got[key][r] {
				missing = append(missing, strings.Trim(strings.Join([]string{r.verb, r.group, r.resource, r.name, r.url}, " "), " "))
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("%s: the CSV lacks %d rules the manifests grant: %s", key, len(missing), strings.Join(missing, "; "))
		}
	}
	for _, key := range sortedKeys(got) {
		for r := range got[key] {
			if !want[key][r] {
				t.Errorf("%s: the CSV grants %+v, which the manifests do not", key, r)
			}
		}
	}
	if len(want) == 0 {
		t.Fatal("the manifests bind no rule to a component: the test reads nothing")
	}
}

// TestEveryObjectIsPlaced checks that each object of the install is in
// the CSV (Deployments, the components' service accounts and the roles
// and bindings TestCSVHoldsEveryRule compares), in the bundle's manifests,
// or in cluster.yaml unchanged; that every webhook is a webhook
// definition with the manifests' fields or in cluster.yaml; and that every
// CRD of manifests/crd is in the bundle with each served version owned.
func TestEveryObjectIsPlaced(t *testing.T) {
	out, res := generated(t)
	csv := res.Bundle.CSV
	inBundle := map[string]*unstructured.Unstructured{}
	entries, err := os.ReadDir(filepath.Join(out, "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		objs, err := readExamples(filepath.Join(out, "manifests", e.Name()))
		if err != nil || len(objs) != 1 {
			t.Fatalf("%s: %d objects, %v (OLM reads one object a file)", e.Name(), len(objs), err)
		}
		inBundle[objs[0].GetKind()+"/"+objs[0].GetName()] = objs[0]
	}
	clusterObjs, err := readExamples(filepath.Join(out, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	inCluster := map[string]*unstructured.Unstructured{}
	for _, u := range clusterObjs {
		inCluster[u.GetKind()+"/"+u.GetName()] = u
	}
	strategy := csv.Spec.InstallStrategy.StrategySpec
	deployments := map[string]bool{}
	for _, d := range strategy.DeploymentSpecs {
		deployments[d.Name] = true
	}
	accounts := map[string]bool{}
	for _, p := range slices.Concat(strategy.Permissions, strategy.ClusterPermissions) {
		accounts[p.ServiceAccountName] = true
	}
	defs := map[string]operatorsv1alpha1.WebhookDescription{}
	for _, w := range csv.Spec.WebhookDefinitions {
		defs[w.GenerateName] = w
	}

	objs, err := build(filepath.Join(repo(t), "manifests", "default"))
	if err != nil {
		t.Fatal(err)
	}
	// Bindings of the components' accounts only are the CSV's
	// permissions, and so are the roles only they name; any other binding
	// or role must be an object of the bundle.
	componentBinding := map[string]bool{}
	byComponents, byOthers := map[string]bool{}, map[string]bool{}
	for _, u := range objs {
		if u.GetKind() != "RoleBinding" && u.GetKind() != "ClusterRoleBinding" {
			continue
		}
		b := &rbacv1.ClusterRoleBinding{}
		decode(t, u, b)
		ours := len(b.Subjects) > 0
		for _, s := range b.Subjects {
			ours = ours && s.Kind == "ServiceAccount" && accounts[s.Name]
		}
		ref := b.RoleRef.Kind + "/" + b.RoleRef.Name
		if ours {
			componentBinding[u.GetKind()+"/"+u.GetName()] = true
			byComponents[ref] = true
		} else {
			byOthers[ref] = true
		}
	}
	for _, u := range objs {
		key := u.GetKind() + "/" + u.GetName()
		switch {
		case u.GetKind() == "Namespace":
		case u.GetKind() == "Deployment":
			if !deployments[u.GetName()] {
				t.Errorf("%s is not in the CSV", describe(u))
			}
		case u.GetKind() == "ServiceAccount" && accounts[u.GetName()]:
		case inCluster[key] != nil:
			if !reflect.DeepEqual(normalize(t, inCluster[key].Object), normalize(t, u.Object)) {
				t.Errorf("%s differs in cluster.yaml", describe(u))
			}
		case inBundle[key] != nil:
			got := inBundle[key].DeepCopy()
			want := u.DeepCopy()
			want.SetNamespace("")
			if !reflect.DeepEqual(normalize(t, got.Object), normalize(t, want.Object)) {
				t.Errorf("%s differs in the bundle", describe(u))
			}
		case componentBinding[key], byComponents[key] && !byOthers[key]:
			// In the CSV's permissions: TestCSVHoldsEveryRule.
		default:
			t.Errorf("%s is neither in the CSV, in the bundle nor in cluster.yaml", describe(u))
		}
		if u.GetKind() != "ValidatingWebhookConfiguration" && u.GetKind() != "MutatingWebhookConfiguration" {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		for _, h := range hooks {
			w := h.(map[string]any)
			name := w["name"].(string)
			def, ok := defs[name]
			if !ok {
				if inCluster[key] == nil {
					t.Errorf("webhook %s of %s is neither a webhook definition nor in cluster.yaml", name, describe(u))
				}
				continue
			}
			if inCluster[key] != nil {
				t.Errorf("webhook %s is both a webhook definition and in cluster.yaml", name)
			}
			if rules := normalize(t, def.Rules); !reflect.DeepEqual(rules, normalize(t, w["rules"])) {
				t.Errorf("webhook %s: rules %v, manifests %v", name, rules, w["rules"])
			}
			if fp, _ := w["failurePolicy"].(string); def.FailurePolicy == nil || string(*def.FailurePolicy) != fp {
				t.Errorf("webhook %s: failurePolicy %v, manifests %q", name, def.FailurePolicy, fp)
			}
			if se, _ := w["sideEffects"].(string); def.SideEffects == nil || string(*def.SideEffects) != se {
				t.Errorf("webhook %s: sideEffects %v, manifests %q", name, def.SideEffects, se)
			}
			path, _, _ := unstructured.NestedString(w, "clientConfig", "service", "path")
			if def.WebhookPath == nil || *def.WebhookPath != path {
				t.Errorf("webhook %s: path %v, manifests %q", name, def.WebhookPath, path)
			}
		}
	}

	crdObjs, err := build(filepath.Join(repo(t), "manifests", "crd"))
	if err != nil {
		t.Fatal(err)
	}
	owned := map[string]bool{}
	for _, o := range csv.Spec.CustomResourceDefinitions.Owned {
		owned[o.Name+"/"+o.Version] = true
		if o.Description == "" {
			t.Errorf("owned %s %s has no description", o.Name, o.Version)
		}
	}
	for _, u := range crdObjs {
		b := inBundle["CustomResourceDefinition/"+u.GetName()]
		if b == nil {
			t.Errorf("CRD %s is not in the bundle", u.GetName())
			continue
		}
		gotSpec, _, _ := unstructured.NestedMap(b.Object, "spec")
		wantSpec, _, _ := unstructured.NestedMap(u.Object, "spec")
		if !reflect.DeepEqual(normalize(t, gotSpec), normalize(t, wantSpec)) {
			t.Errorf("CRD %s: the bundle's spec differs from manifests/crd's", u.GetName())
		}
		versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
		for _, v := range versions {
			v := v.(map[string]any)
			if served, _ := v["served"].(bool); served && !owned[u.GetName()+"/"+v["name"].(string)] {
				t.Errorf("CRD %s version %s is served but not owned in the CSV", u.GetName(), v["name"])
			}
		}
	}
	if len(csv.Spec.RelatedImages) == 0 {
		t.Error("no relatedImages")
	}
}

// TestOperandReplicas checks that the placement operands' Deployments in
// the CSV carry the kustomize install's replica count where the placement
// operator reads it under OLM (the pod template: a CSV's Deployment has no
// annotations), so both installs run the same replicas.
func TestOperandReplicas(t *testing.T) {
	_, res := generated(t)
	objs, err := build(filepath.Join(repo(t), "manifests", "default"))
	if err != nil {
		t.Fatal(err)
	}
	specs := map[string]operatorsv1alpha1.StrategyDeploymentSpec{}
	for _, s := range res.Bundle.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		specs[s.Name] = s
	}
	want := map[string]string{}
	for _, u := range objs {
		if v, ok := u.GetAnnotations()[placement.ReplicasAnnotation]; ok && u.GetKind() == "Deployment" {
			want[u.GetName()] = v
		}
	}
	if len(want) < 2 {
		t.Fatalf("the install annotates %d Deployments with %s, want the placement controller's and webhook's", len(want), placement.ReplicasAnnotation)
	}
	for name, v := range want {
		s, ok := specs[name]
		if !ok {
			t.Errorf("Deployment %s is not in the CSV", name)
			continue
		}
		if got := s.Spec.Template.Annotations[placement.ReplicasAnnotation]; got != v {
			t.Errorf("Deployment %s: the CSV's pod template has %s=%q, the install %q", name, placement.ReplicasAnnotation, got, v)
		}
	}
	for _, n := range res.Bundle.Notes {
		if strings.Contains(n, placement.ReplicasAnnotation) {
			t.Errorf("note: %s", n)
		}
	}
}

// TestConversionWebhook checks that the ClusterPodPlacementConfig CRD's
// conversion webhook is a ConversionWebhook definition of the CSV (so
// OLM serves it and writes the CRD's Service and CA), served by the
// placement operator reading OLM's certificate; TestBundleValidates
// validates the same bundle.
func TestConversionWebhook(t *testing.T) {
	out, res := generated(t)
	if _, err := Validate(out); err != nil {
		t.Fatal(err)
	}
	const crd = "clusterpodplacementconfigs.multiarch.openshift.io"
	var def *operatorsv1alpha1.WebhookDescription
	for i, d := range res.Bundle.CSV.Spec.WebhookDefinitions {
		if d.Type == operatorsv1alpha1.ConversionWebhook && slices.Contains(d.ConversionCRDs, crd) {
			def = &res.Bundle.CSV.Spec.WebhookDefinitions[i]
		}
	}
	if def == nil {
		t.Fatalf("no ConversionWebhook definition for %s: %+v", crd, res.Bundle.CSV.Spec.WebhookDefinitions)
	}
	if def.DeploymentName != "archway-placement-operator" || def.WebhookPath == nil || *def.WebhookPath != "/convert" || def.ContainerPort != 443 {
		t.Errorf("definition %+v: want archway-placement-operator's /convert on 443", def)
	}
	for _, s := range res.Bundle.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		if s.Name != def.DeploymentName {
			continue
		}
		args := s.Spec.Template.Spec.Containers[0].Args
		if !slices.Contains(args, "--cert-management=external") || !slices.Contains(args, "--webhook-cert-dir="+olmWebhookCertDir) ||
			slices.Contains(args, "--cert-management=internal") {
			t.Errorf("Deployment %s does not read OLM's certificate: %q", s.Name, args)
		}
	}
}
