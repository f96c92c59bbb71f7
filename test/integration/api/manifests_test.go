package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/archway-build/archway/test/bed"
)

// TestManifestsDryRun builds every kustomization under manifests/ (the
// default install, its overlays and each part on its own; kustomize
// Components are built through the kustomizations that include them) with
// kubectl kustomize and applies the result with a server-side dry run, so
// that each object is checked against the apiserver's schemas (CRDs,
// webhook configurations, admission policies, RBAC, Deployments) without
// being created. cert-manager's and OpenShift's kinds are mapped by
// stand-in CRDs (testdata/overlay-crds.yaml), OpenShift's
// SecurityContextConstraints by its real CRD. Each install (manifests/default
// and the overlays of it) must keep the order `kubectl delete -k` relies
// on, hold no CRD (manifests/crd installs them on their own) and have each
// webhook configuration's and the APIService's caBundle written by exactly
// one writer that matches the serving certificate (checkCAInjection).
func TestManifestsDryRun(t *testing.T) {
	assets, err := bed.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(assets, "kubectl")
	root := filepath.Join(bed.RepoRoot(), "manifests")
	var dirs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "kustomization.yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil && !bytes.Contains(data, []byte("\nkind: Component\n")) {
			dirs = append(dirs, filepath.Dir(path))
		}
		return err
	})
	if err != nil || len(dirs) < 8 {
		t.Fatalf("kustomizations under %s: %v (%v)", root, dirs, err)
	}
	// manifests/monitoring, a Component, as its users add it.
	monitoring := filepath.Join(t.TempDir(), "with-monitoring")
	if err := os.Mkdir(monitoring, 0o755); err != nil {
		t.Fatal(err)
	}
	def, _ := filepath.Rel(monitoring, filepath.Join(root, "default"))
	mon, _ := filepath.Rel(monitoring, filepath.Join(root, "monitoring"))
	defK, err := os.ReadFile(filepath.Join(root, "default", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(defK, []byte("\nsortOptions:"))
	if i < 0 {
		t.Fatal("manifests/default/kustomization.yaml has no sortOptions")
	}
	if err := os.WriteFile(filepath.Join(monitoring, "kustomization.yaml"), fmt.Appendf(nil,
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\ncomponents: [%s]\n%s", def, mon, defK[i+1:]), 0o600); err != nil {
		t.Fatal(err)
	}
	dirs = append(dirs, monitoring)
	if err := b.ServeOverlayKinds(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		rel, err := filepath.Rel(bed.RepoRoot(), dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = filepath.Base(dir)
		}
		t.Run(rel, func(t *testing.T) {
			built, err := exec.Command(kubectl, "kustomize", dir).Output()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v", rel, stderrOf(err))
			}
			kinds := kindsOf(t, built)
			if slices.Contains(kinds, "Deployment") && slices.Contains(kinds, "ClusterPodPlacementConfig") {
				if err := checkInstallOrder(kinds); err != nil {
					t.Errorf("%s: %v (copy sortOptions from manifests/default)", rel, err)
				}
				if err := checkCertManagement(t, built); err != nil {
					t.Errorf("%s: %v", rel, err)
				}
				if err := checkCAInjection(built); err != nil {
					t.Errorf("%s: %v", rel, err)
				}
			}
			// --force-conflicts: the bed installed the CRDs with a manager
			// of its own, which owns spec.conversion.strategy (None); a
			// cluster upgraded from manifests/crd owns none of it.
			apply := exec.Command(kubectl, "--kubeconfig", b.Kubeconfig, "apply", "--dry-run=server", "--server-side",
				"--force-conflicts", "--field-manager=manifests-test", "-f", "-")
			apply.Stdin = bytes.NewReader(built)
			out, err := apply.CombinedOutput()
			if err != nil {
				t.Fatalf("server-side dry run of %s: %v\n%s", rel, err, out)
			}
			if !strings.Contains(string(out), "(server dry run)") {
				t.Errorf("kubectl did not dry-run %s:\n%s", rel, out)
			}
		})
	}
}

// checkInstallOrder says what is out of place in an install's kinds, in
// the order kubectl applies and deletes them: `kubectl delete -k` must
// delete the webhook configurations (so nothing calls a webhook whose pods
// are going) and the ClusterPodPlacementConfig (released by the placement
// controller while it still runs) before archway's namespace, whose
// deletion stops the components; and it must not delete the CRDs.
func checkInstallOrder(kinds []string) error {
	first := func(kind string) int { return slices.Index(kinds, kind) }
	last := func(kind string) int {
		for i := len(kinds) - 1; i >= 0; i-- {
			if kinds[i] == kind {
				return i
			}
		}
		return -1
	}
	ns := first("Namespace")
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ClusterPodPlacementConfig"} {
		if last(kind) > ns {
			return errors.New(kind + " comes after the Namespace")
		}
	}
	if first("CustomResourceDefinition") >= 0 {
		return errors.New("it holds CustomResourceDefinitions: `kubectl delete -k` would delete them and every Build, BuildConfig and policy with them (install them from manifests/crd on their own)")
	}
	return nil
}

// kindsOf lists the kinds of a multi-document YAML stream, in order.
func kindsOf(t *testing.T, data []byte) []string {
	t.Helper()
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var kinds []string
	for {
		var obj metav1.TypeMeta
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return kinds
		} else if err != nil {
			t.Fatal(err)
		}
		if obj.Kind != "" {
			kinds = append(kinds, obj.Kind)
		}
	}
}

// checkCertManagement says what is wrong with an install's webhook
// certificates: a Deployment with --cert-management=internal needs
// --webhook-service and the Secret of --webhook-cert-secret shipped in the
// install (build-controller refuses to start without it); one with
// --cert-management=external mounts its Secret, which an issuer makes, so
// the install must not ship it (an empty Secret applied would be stale or
// refused by OpenShift's service CA).
func checkCertManagement(t *testing.T, built []byte) error {
	t.Helper()
	secrets := map[string]bool{}
	var deps []appsv1.Deployment
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(built), 4096)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		var meta metav1.PartialObjectMetadata
		if err := json.Unmarshal(raw, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "Secret":
			secrets[meta.Name] = true
		case "Deployment":
			var d appsv1.Deployment
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatal(err)
			}
			deps = append(deps, d)
		}
	}
	for _, d := range deps {
		flags := map[string]string{}
		for _, a := range d.Spec.Template.Spec.Containers[0].Args {
			if k, v, ok := strings.Cut(a, "="); ok {
				flags[k] = v
			}
		}
		if _, serves := flags["--webhook-cert-dir"]; !serves {
			continue
		}
		switch flags["--cert-management"] {
		case "internal":
			if flags["--webhook-service"] == "" || !secrets[flags["--webhook-cert-secret"]] {
				return fmt.Errorf("deployment %s: --cert-management=internal needs --webhook-service and the Secret %q shipped", d.Name, flags["--webhook-cert-secret"])
			}
		case "external":
			var mounted string
			for _, v := range d.Spec.Template.Spec.Volumes {
				if v.Secret != nil {
					mounted = v.Secret.SecretName
				}
			}
			if mounted == "" || secrets[mounted] {
				return fmt.Errorf("deployment %s: --cert-management=external must mount its issuer's Secret (%q) and not ship it", d.Name, mounted)
			}
		default:
			return fmt.Errorf("deployment %s serves webhooks without --cert-management", d.Name)
		}
	}
	return nil
}

func stderrOf(err error) string {
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return err.Error() + ": " + string(ee.Stderr)
	}
	return err.Error()
}

// TestOpenShiftPlacementOverlay: manifests/openshift/placement installs
// placement and scheduling on OpenShift without the build half: its
// objects are exactly those of manifests/openshift but the build half's
// (build-controller, the trigger endpoint, the build authorization, the
// build pods' SCC and the Route; archway's namespace, configuration file
// and shared roles, manifests/base and base/rbac, stay), each the same
// but the registry settings' RoleBinding, which binds the placement
// controller alone; and
// its CRDs are manifests/crd's but the build ones. TestManifestsDryRun
// applies it with a server-side dry run.
func TestOpenShiftPlacementOverlay(t *testing.T) {
	objs := func(dir string) map[string]string {
		t.Helper()
		built := kustomize(t, dir)
		out := map[string]string{}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(built), 4096)
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				return out
			} else if err != nil {
				t.Fatal(err)
			}
			var meta metav1.PartialObjectMetadata
			if err := json.Unmarshal(raw, &meta); err != nil {
				t.Fatal(err)
			}
			out[meta.Kind+" "+meta.Namespace+"/"+meta.Name] = string(raw)
		}
	}
	placement := objs("openshift/placement")
	want := objs("openshift")
	base := objs("base")
	maps.Copy(base, objs("base/rbac"))
	for _, half := range []string{"build-controller", "build-triggers", "authorization", "openshift/build-scc"} {
		for id := range objs(half) {
			if _, shared := base[id]; !shared {
				delete(want, id)
			}
		}
	}
	delete(want, "Route archway-system/archway-build-triggers")
	delete(want, "ClusterRoleBinding /archway-build-scc")
	const registries = "RoleBinding openshift-config/archway-openshift-registries"
	for _, id := range slices.Sorted(maps.Keys(want)) {
		got, ok := placement[id]
		switch {
		case !ok:
			t.Errorf("%s of manifests/openshift is missing", id)
		case id == registries:
			if strings.Contains(got, `"build-controller"`) || !strings.Contains(got, `"archway-placement-controller"`) {
				t.Errorf("%s binds %s, want the placement controller alone", id, got)
			}
		case got != want[id]:
			t.Errorf("%s differs from manifests/openshift's:\n%s\nwant:\n%s", id, got, want[id])
		}
	}
	for _, id := range slices.Sorted(maps.Keys(placement)) {
		if _, ok := want[id]; !ok {
			t.Errorf("%s is not placement's, scheduling's or shared", id)
		}
		if strings.Contains(id, "archway-build") || strings.Contains(id, "build.openshift.io") {
			t.Errorf("%s is the build half's", id)
		}
	}
	crds := objs("openshift/placement/crd")
	for id := range objs("crd") {
		build := strings.Contains(id, "build.openshift.io") || strings.Contains(id, "build.archway.dev")
		if _, ok := crds[id]; ok == build {
			t.Errorf("manifests/openshift/placement/crd: %s present %t, want %t", id, ok, !build)
		}
	}
}

// TestCRDsWithoutPlacement: manifests/crd-without-placement, for a cluster
// where OLM installed the multiarch tuning operator (MTO), builds with
// kustomize into every CRD of manifests/crd, unchanged, but the two MTO
// owns (ClusterPodPlacementConfig, PodPlacementConfig), and applies
// without --force-conflicts (server-side dry run) on the bed with MTO's
// CRDs as OLM installs them (mtoCRDs), which it leaves as they are.
func TestCRDsWithoutPlacement(t *testing.T) {
	crds := func(dir string) map[string]string {
		t.Helper()
		out := map[string]string{}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(kustomize(t, dir)), 4096)
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				return out
			} else if err != nil {
				t.Fatal(err)
			}
			var meta metav1.PartialObjectMetadata
			if err := json.Unmarshal(raw, &meta); err != nil {
				t.Fatal(err)
			}
			if meta.Kind != "CustomResourceDefinition" {
				t.Errorf("manifests/%s holds %s %s: only CRDs belong there", dir, meta.Kind, meta.Name)
			}
			out[meta.Name] = string(raw)
		}
	}
	all, without := crds("crd"), crds("crd-without-placement")
	for _, name := range slices.Sorted(maps.Keys(all)) {
		got, ok := without[name]
		switch {
		case slices.Contains(placementCRDs, name):
			if ok {
				t.Errorf("manifests/crd-without-placement holds %s, which MTO owns", name)
			}
		case !ok:
			t.Errorf("manifests/crd-without-placement lacks %s", name)
		case got != all[name]:
			t.Errorf("manifests/crd-without-placement's %s differs from manifests/crd's", name)
		}
	}
	for name := range without {
		if _, ok := all[name]; !ok {
			t.Errorf("manifests/crd-without-placement holds %s, which manifests/crd does not", name)
		}
	}

	saveCRDs(t, placementCRDs)
	mtoCRDs(t)
	out, err := kubectlIn(t, bed.RepoRoot(), "apply", "--server-side", "--dry-run=server", "-k", "manifests/crd-without-placement").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply --server-side -k manifests/crd-without-placement beside MTO's CRDs: %v\n%s", err, out)
	}
	for name := range without {
		if !strings.Contains(string(out), name+" serverside-applied (server dry run)") {
			t.Errorf("%s was not applied:\n%s", name, out)
		}
	}
	checkMTOConversion(t)
}
