package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
)

// placementCRDs are the CRDs the multiarch tuning operator (MTO) owns
// under the same names as archway's.
var placementCRDs = []string{placement.ClusterPodPlacementConfigCRDName, "podplacementconfigs.multiarch.openshift.io"}

// olmManager stands for OLM's field manager on the CRDs it installed.
const olmManager = "catalog"

// TestCRDUpgradeApply runs the CRD step of install.md's upgrade (kustomize)
// with a server-side dry run, as written there, on the bed in two states:
// archway's install (kubectl applied manifests/crd, the placement operator
// wrote the conversion CA), where it must apply without a conflict; and a
// cluster where OLM installed MTO's placement CRDs (its labels, its
// conversion webhook, its field manager), where it must stop with a
// conflict rather than take them over.
func TestCRDUpgradeApply(t *testing.T) {
	ctx := t.Context()
	args := upgradeCRDStep(t)
	saveCRDs(t, placementCRDs)

	// archway's install: the CRDs as the install applies them, then the CA
	// as the placement operator writes it (a merge patch of its own).
	run(t, kubectlIn(t, bed.RepoRoot(), "apply", "--server-side", "--force-conflicts", "-k", "manifests/crd"))
	ca := base64.StdEncoding.EncodeToString(b.Config.CAData)
	patch := []byte(`{"spec":{"conversion":{"webhook":{"clientConfig":{"caBundle":"` + ca + `"}}}}}`)
	if err := b.Client.Patch(ctx, crdObject(placement.ClusterPodPlacementConfigCRDName), client.RawPatch(types.MergePatchType, patch), client.FieldOwner("build-controller")); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectlIn(t, bed.RepoRoot(), append(args, "--dry-run=server")...).CombinedOutput(); err != nil {
		t.Fatalf("kubectl %s on archway's install: %v\n%s", strings.Join(args, " "), err, out)
	}

	// MTO's, as OLM installs them: OLM's labels and MTO's conversion
	// webhook, written by OLM's field manager.
	mtoCRDs(t)
	out, err := kubectlIn(t, bed.RepoRoot(), append(args, "--dry-run=server")...).CombinedOutput()
	conflict := err != nil && strings.Contains(string(out), `with "`+olmManager+`"`) &&
		strings.Contains(string(out), ".spec.conversion.webhook.clientConfig.service.name") &&
		!strings.Contains(string(out), placement.ClusterPodPlacementConfigCRDName+" serverside-applied")
	if !conflict {
		t.Fatalf("kubectl %s where OLM owns MTO's CRDs: %v, want a conflict with %s on %s's conversion webhook:\n%s",
			strings.Join(args, " "), err, olmManager, placement.ClusterPodPlacementConfigCRDName, out)
	}
	checkMTOConversion(t)
}

// upgradeCRDStep is the kubectl command of install.md's kustomize upgrade
// that applies manifests/crd, without "kubectl" and the comment.
func upgradeCRDStep(t *testing.T) []string {
	t.Helper()
	path := filepath.Join(bed.RepoRoot(), "docs", "admin-guide", "install.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(data), "\n## Upgrade\n")
	section, _, _ = strings.Cut(section, "\n## ")
	for _, line := range strings.Split(section, "\n") {
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		if len(fields) > 2 && fields[0] == "kubectl" && fields[1] == "apply" && fields[len(fields)-1] == "manifests/crd" {
			return fields[1:]
		}
	}
	t.Fatalf("%s: the Upgrade section has no kubectl apply ... manifests/crd", path)
	return nil
}

// kubectlIn is kubectl on the bed, run in dir.
func kubectlIn(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	assets, err := bed.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(assets, "kubectl"), append([]string{"--kubeconfig", b.Kubeconfig}, args...)...)
	cmd.Dir = dir
	return cmd
}

func run(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args[1:], " "), err, out)
	}
}

func crdObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	u.SetName(name)
	return u
}

// saveCRDs puts the CRDs back as they are when the test ends: their
// labels and spec (the bed's, which the suite's other tests use).
func saveCRDs(t *testing.T, names []string) {
	t.Helper()
	for _, name := range names {
		saved := crdObject(name)
		if err := b.Client.Get(t.Context(), client.ObjectKeyFromObject(saved), saved); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx := context.Background()
			cur := crdObject(name)
			if err := b.Client.Get(ctx, client.ObjectKeyFromObject(cur), cur); err != nil {
				t.Errorf("restoring %s: %v", name, err)
				return
			}
			cur.SetLabels(saved.GetLabels())
			cur.Object["spec"] = saved.Object["spec"]
			if err := b.Client.Update(ctx, cur); err != nil {
				t.Errorf("restoring %s: %v", name, err)
			}
		})
	}
}

// mtoConversion is MTO's conversion webhook in the stand-in: a Service in
// MTO's namespace.
var mtoConversion = map[string]any{
	"strategy": "Webhook",
	"webhook": map[string]any{
		"conversionReviewVersions": []any{"v1"},
		"clientConfig": map[string]any{"service": map[string]any{
			"namespace": "openshift-multiarch-tuning-operator", "name": "mto-conversion", "path": "/convert", "port": int64(443),
		}},
	},
}

// mtoCRDs makes the placement CRDs MTO's as OLM installs them: OLM's
// labels, MTO's conversion webhook on ClusterPodPlacementConfig, applied
// by OLM's field manager.
func mtoCRDs(t *testing.T) {
	t.Helper()
	for _, name := range placementCRDs {
		crd := crdObject(name)
		crd.SetLabels(map[string]string{
			"olm.managed": "true",
			"operators.coreos.com/multiarch-tuning-operator.openshift-multiarch-tuning-operator": "",
		})
		if name == placement.ClusterPodPlacementConfigCRDName {
			crd.Object["spec"] = map[string]any{"conversion": mtoConversion}
		}
		data, err := json.Marshal(crd.Object)
		if err != nil {
			t.Fatal(err)
		}
		apply := kubectlIn(t, bed.RepoRoot(), "apply", "--server-side", "--force-conflicts", "--field-manager="+olmManager, "-f", "-")
		apply.Stdin = bytes.NewReader(data)
		run(t, apply)
	}
	checkMTOConversion(t)
}

// checkMTOConversion fails unless the ClusterPodPlacementConfig CRD still
// converts through MTO's webhook.
func checkMTOConversion(t *testing.T) {
	t.Helper()
	crd := crdObject(placement.ClusterPodPlacementConfigCRDName)
	if err := b.Client.Get(t.Context(), client.ObjectKeyFromObject(crd), crd); err != nil {
		t.Fatal(err)
	}
	svc, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service", "name")
	if svc != "mto-conversion" {
		t.Errorf("the ClusterPodPlacementConfig CRD converts through the Service %q, want MTO's (mto-conversion)", svc)
	}
}
