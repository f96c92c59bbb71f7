package policy

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	jsonpatchv2 "gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

// TestSpecPatch applies the webhook's patch to the raw pod and checks the
// result is the merged spec, with every other field as it was.
func TestSpecPatch(t *testing.T) {
	pods := map[string]*corev1.Pod{
		"bare": {ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
			SchedulerName: corev1.DefaultSchedulerName, Containers: []corev1.Container{{Name: "c", Image: "i"}},
		}},
		"with criteria": {ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{
			SchedulerName: corev1.DefaultSchedulerName, Containers: []corev1.Container{{Name: "c", Image: "i"}},
			NodeSelector: map[string]string{"pool": "mine"}, Tolerations: []corev1.Toleration{tolEtcd},
			Affinity: required(term(zoneA)),
		}},
	}
	policies := []Policy{pol("p", 0, kupidv1alpha1.SchedulingCriteria{
		NodeSelector: map[string]string{"zone": "a"}, NodeName: "n1", SchedulerName: "s",
		Tolerations: []corev1.Toleration{tolSpot}, Affinity: required(term(poolEtc)),
	})}
	for name, pod := range pods {
		t.Run(name, func(t *testing.T) {
			merged, _ := Merge(&pod.Spec, policies)
			ops, err := specPatch("/spec", &pod.Spec, merged)
			if err != nil {
				t.Fatal(err)
			}
			got := &corev1.Pod{}
			applyPatch(t, pod, ops, got)
			want := pod.DeepCopy()
			want.Spec = *merged
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("patched pod (-want +got):\n%s", diff)
			}
		})
	}
}

// applyPatch applies the webhook's ops to obj's JSON, as the apiserver
// does, and decodes the result into out.
func applyPatch(t *testing.T, obj any, ops []jsonpatchv2.Operation, out any) {
	t.Helper()
	raw, _ := json.Marshal(obj)
	patch, _ := json.Marshal(ops)
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := p.Apply(raw)
	if err != nil {
		t.Fatalf("applying %s: %v", patch, err)
	}
	if err := json.Unmarshal(patched, out); err != nil {
		t.Fatal(err)
	}
}
