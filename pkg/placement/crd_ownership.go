package placement

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterPodPlacementConfigCRDName is the name of the
// ClusterPodPlacementConfig CRD, the multiarch tuning operator's as well as
// archway's.
const ClusterPodPlacementConfigCRDName = "clusterpodplacementconfigs.multiarch.openshift.io"

// AdoptCRDAnnotation, set to "true" on the ClusterPodPlacementConfig CRD by
// an administrator, lets archway's placement run on a CRD that OLM
// installed (for the multiarch tuning operator). Without it archway leaves
// such a CRD, and every object of it, alone.
const AdoptCRDAnnotation = "placement.archway.dev/adopt-crd"

// OLM's marks on what it installs: olm.managed and olm.owner labels, and
// the operators.coreos.com/<package>.<namespace> label of the Operator
// object that lists an operator's components.
const (
	olmManagedLabel     = "olm.managed"
	olmOwnerLabel       = "olm.owner"
	olmComponentsPrefix = "operators.coreos.com/"
)

// OLMOwnerLabel is the first label (sorted) by which OLM marks crd as
// installed by it, "" when it carries none.
func OLMOwnerLabel(crd metav1.Object) string {
	var found []string
	for k := range crd.GetLabels() {
		if k == olmManagedLabel || k == olmOwnerLabel || strings.HasPrefix(k, olmComponentsPrefix) {
			found = append(found, k)
		}
	}
	if len(found) == 0 {
		return ""
	}
	slices.Sort(found)
	return found[0]
}

// CRDRefusal says why archway's placement must not run on the
// ClusterPodPlacementConfig CRD crd, with what the administrator can do:
// OLM installed it (for the multiarch tuning operator) and nobody told
// archway to adopt it. It is "" when archway may run: the CRD is not OLM's,
// or it carries AdoptCRDAnnotation "true". A nil crd (not installed) is
// not refused.
func CRDRefusal(crd metav1.Object) string {
	if crd == nil {
		return ""
	}
	label := OLMOwnerLabel(crd)
	if label == "" || crd.GetAnnotations()[AdoptCRDAnnotation] == "true" {
		return ""
	}
	return fmt.Sprintf("the CustomResourceDefinition %s belongs to OLM (label %s), most likely to the multiarch tuning operator (MTO), and "+
		"archway's placement leaves it and its ClusterPodPlacementConfig alone. Either keep MTO and leave archway's placement out "+
		"(an overlay without manifests/placement, CRDs from manifests/crd-without-placement), or uninstall MTO (its Subscription "+
		"and ClusterServiceVersion), apply archway's CRDs (kubectl apply --server-side --force-conflicts -k manifests/crd) and "+
		"adopt it: kubectl annotate crd %s %s=true",
		crd.GetName(), label, crd.GetName(), AdoptCRDAnnotation)
}
