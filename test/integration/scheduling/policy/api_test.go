package policy

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

// TestInvalidPoliciesRejected: a policy that would make the pods it selects
// invalid is rejected when written, by the CRD's rules or the validating
// webhook, with a message that names the field.
func TestInvalidPoliciesRejected(t *testing.T) {
	ns := newNamespace(t, nil)
	everything := &metav1.LabelSelector{}
	cases := []struct {
		name string
		obj  client.Object
		want string
	}{
		{"toleration Exists with a value (CEL)", nsPolicy(ns, "a", 0, everything, kupidv1alpha1.SchedulingCriteria{
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}},
		}), "a toleration with operator Exists must not have a value"},
		{"priority above the maximum (schema)", nsPolicy(ns, "b", 1001, everything, kupidv1alpha1.SchedulingCriteria{}),
			"spec.priority"},
		{"selector operator unknown (CEL)", nsPolicy(ns, "c", 0, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: "Near", Values: []string{"x"}},
		}}, kupidv1alpha1.SchedulingCriteria{}), "no other operator exists"},
		{"In without values (webhook)", nsPolicy(ns, "d", 0, everything, kupidv1alpha1.SchedulingCriteria{
			Affinity: requiredAffinity(term(corev1.NodeSelectorRequirement{Key: "zone", Operator: corev1.NodeSelectorOpIn})),
		}), "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values: Required value: operator In needs at least one value"},
		{"bad nodeSelector value on a cluster policy (webhook)", clusterPolicy("bad-"+ns, 0, everything, everything, kupidv1alpha1.SchedulingCriteria{
			NodeSelector: map[string]string{"pool": "not a label value"},
		}), "spec.nodeSelector[pool]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := k8s.Create(context.Background(), tc.obj)
			if err == nil {
				_ = k8s.Delete(context.Background(), tc.obj)
				t.Fatalf("created; want it rejected with %q", tc.want)
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
				t.Errorf("error %v is not Invalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
