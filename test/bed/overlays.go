package bed

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServeOverlayKinds makes the bed's apiserver serve what archway's optional
// overlays (cert-manager, OpenShift, monitoring) apply besides archway's own
// kinds, so that a server-side dry run of them checks every object: the
// stand-in CRDs of test/integration/api/testdata/overlay-crds.yaml
// (cert-manager's kinds, OpenShift's Route, the Prometheus operator's),
// OpenShift's own SecurityContextConstraints CRD from the openshift/api
// version go.mod pins, and the namespaces their objects live in (a dry run
// creates none): archway's and OpenShift's openshift-config.
func (b *Bed) ServeOverlayKinds(ctx context.Context) error {
	for _, name := range []string{"archway-system", "archway-emulation", "openshift-config"} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := b.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	kubectl, err := Tool("kubectl")
	if err != nil {
		return err
	}
	api, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		return fmt.Errorf("finding github.com/openshift/api: %w", err)
	}
	scc := filepath.Join(strings.TrimSpace(string(api)), "security", "v1", "zz_generated.crd-manifests",
		"0000_03_config-operator_01_securitycontextconstraints.crd.yaml")
	for _, args := range [][]string{
		{"apply", "-f", filepath.Join(RepoRoot(), "test", "integration", "api", "testdata", "overlay-crds.yaml")},
		{"apply", "--server-side", "-f", scc},
		{"wait", "--for=condition=Established", "--timeout=30s",
			"crd/securitycontextconstraints.security.openshift.io",
			"crd/certificates.cert-manager.io", "crd/issuers.cert-manager.io", "crd/routes.route.openshift.io",
			"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com"},
	} {
		if out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", b.Kubeconfig}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}
