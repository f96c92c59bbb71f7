package conversion

import (
	"encoding/base64"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/archway-build/archway/pkg/placement"
)

func TestCABundlePatch(t *testing.T) {
	ours := types.NamespacedName{Namespace: "archway-system", Name: "archway-placement-operator"}
	ca := []byte("-----BEGIN CERTIFICATE-----\nours\n-----END CERTIFICATE-----\n")
	crd := func(labels map[string]any, strategy, ns, name, caBundle string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": placement.ClusterPodPlacementConfigCRDName},
			"spec": map[string]any{"conversion": map[string]any{"strategy": strategy, "webhook": map[string]any{"clientConfig": map[string]any{
				"service": map[string]any{"namespace": ns, "name": name, "path": "/convert"}, "caBundle": caBundle,
			}}}},
		}}
		if labels != nil {
			_ = unstructured.SetNestedMap(u.Object, labels, "metadata", "labels")
		}
		return u
	}
	olm := map[string]any{"operators.coreos.com/multiarch-tuning-operator.openshift-multiarch-tuning-operator": ""}
	for _, tt := range []struct {
		name      string
		crd       *unstructured.Unstructured
		wantPatch bool
		wantSkip  string
	}{
		{name: "ours without a CA", crd: crd(nil, "Webhook", "archway-system", "archway-placement-operator", ""), wantPatch: true},
		{name: "ours with another CA", crd: crd(nil, "Webhook", "archway-system", "archway-placement-operator", base64.StdEncoding.EncodeToString([]byte("old"))), wantPatch: true},
		{name: "ours with this CA", crd: crd(nil, "Webhook", "archway-system", "archway-placement-operator", base64.StdEncoding.EncodeToString(ca))},
		{name: "MTO's service", crd: crd(nil, "Webhook", "openshift-multiarch-tuning-operator", "multiarch-tuning-operator-controller-manager-service", "bXRv"),
			wantSkip: "is the Service openshift-multiarch-tuning-operator/multiarch-tuning-operator-controller-manager-service"},
		{name: "OLM's, not adopted", crd: crd(olm, "Webhook", "archway-system", "archway-placement-operator", ""), wantSkip: "belongs to OLM"},
		{name: "no conversion webhook", crd: crd(nil, "None", "", "", ""), wantSkip: `strategy is "None"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			patch, skip, err := caBundlePatch(tt.crd, ours, ca)
			if err != nil {
				t.Fatal(err)
			}
			if (patch != nil) != tt.wantPatch {
				t.Errorf("patch %s, want one: %v", patch, tt.wantPatch)
			}
			if patch != nil && !strings.Contains(string(patch), `"caBundle":"`+base64.StdEncoding.EncodeToString(ca)+`"`) {
				t.Errorf("patch %s does not set the CA", patch)
			}
			if tt.wantSkip == "" && skip != "" || !strings.Contains(skip, tt.wantSkip) {
				t.Errorf("skip %q, want %q", skip, tt.wantSkip)
			}
		})
	}
}
