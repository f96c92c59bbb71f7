package api

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/archway-build/archway/test/bed"
)

// TestManifestsDryRun builds every kustomization under manifests/ with
// kubectl kustomize and applies the result with a server-side dry run, so
// that each object is checked against the apiserver's schemas (CRDs,
// webhook configurations, admission policies, RBAC, Deployments) without
// being created.
func TestManifestsDryRun(t *testing.T) {
	assets, err := bed.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(assets, "kubectl")
	root := filepath.Join(bed.RepoRoot(), "manifests")
	var dirs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "kustomization.yaml" {
			dirs = append(dirs, filepath.Dir(path))
		}
		return err
	})
	if err != nil || len(dirs) < 3 {
		t.Fatalf("kustomizations under %s: %v (%v)", root, dirs, err)
	}
	// A dry run creates nothing: archway's namespace must exist for the
	// objects in it to be checked.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "archway-system"}}
	if err := b.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		rel, _ := filepath.Rel(bed.RepoRoot(), dir)
		t.Run(rel, func(t *testing.T) {
			built, err := exec.Command(kubectl, "kustomize", dir).Output()
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v", rel, stderrOf(err))
			}
			apply := exec.Command(kubectl, "--kubeconfig", b.Kubeconfig, "apply", "--dry-run=server", "--server-side",
				"--field-manager=manifests-test", "-f", "-")
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

func stderrOf(err error) string {
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return err.Error() + ": " + string(ee.Stderr)
	}
	return err.Error()
}
