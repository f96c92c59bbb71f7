package placement

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCRDRefusal(t *testing.T) {
	crd := func(labels, annotations map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: ClusterPodPlacementConfigCRDName, Labels: labels, Annotations: annotations}}
	}
	olm := map[string]string{"operators.coreos.com/multiarch-tuning-operator.openshift-multiarch-tuning-operator": ""}
	for _, tt := range []struct {
		name    string
		crd     metav1.Object
		refused string // the label named, "" when not refused
	}{
		{name: "not installed"},
		{name: "archway's", crd: crd(map[string]string{"app.kubernetes.io/part-of": "archway"}, nil)},
		{name: "OLM's operator components label", crd: crd(olm, nil), refused: "operators.coreos.com/multiarch-tuning-operator.openshift-multiarch-tuning-operator"},
		{name: "olm.managed", crd: crd(map[string]string{"olm.managed": "true"}, nil), refused: "olm.managed"},
		{name: "olm.owner", crd: crd(map[string]string{"olm.owner": "multiarch-tuning-operator.v1.1.0"}, nil), refused: "olm.owner"},
		{name: "adopted", crd: crd(olm, map[string]string{AdoptCRDAnnotation: "true"})},
		{name: "adoption must say true", crd: crd(map[string]string{"olm.managed": "true"}, map[string]string{AdoptCRDAnnotation: "yes"}), refused: "olm.managed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := CRDRefusal(tt.crd)
			switch {
			case tt.refused == "" && got != "":
				t.Errorf("refused: %s", got)
			case tt.refused != "" && !strings.Contains(got, "label "+tt.refused+")"):
				t.Errorf("refusal %q does not name the label %s", got, tt.refused)
			case tt.refused != "" && !strings.Contains(got, AdoptCRDAnnotation+"=true"):
				t.Errorf("refusal %q does not say how to adopt", got)
			}
		})
	}
}
