package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUngatedPodKey(t *testing.T) {
	full := func(gates ...string) *corev1.Pod {
		p := &corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7",
				Labels: map[string]string{"app": "a"}, Annotations: map[string]string{"note": "n"},
				OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs"}},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			},
			Spec: corev1.PodSpec{
				Containers:         []corev1.Container{{Name: "c", Image: "registry.example.com/app:1"}},
				ServiceAccountName: "sa", ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}},
				NodeSelector: map[string]string{"disk": "ssd"},
			},
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		}
		for _, g := range gates {
			p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
		}
		return p
	}
	withoutManagedFields := func(p *corev1.Pod) *corev1.Pod {
		p.ManagedFields = nil
		return p
	}
	key := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7"},
	}
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"a gated pod is kept whole but its managed fields: placing it writes it back", full(SchedulingGate), withoutManagedFields(full(SchedulingGate))},
		{"a pod gated by us and others too", full("other", SchedulingGate), withoutManagedFields(full("other", SchedulingGate))},
		{"a pod without the gate is its key", full(), key},
		{"a pod with another gate only is its key", full("other"), key},
		{"a tombstone goes through", "not a pod", "not a pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ungatedPodKey(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}
