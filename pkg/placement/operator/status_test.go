package operator

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
)

func TestRolloutOf(t *testing.T) {
	dep := func(replicas int32, observed, updated, available, total int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: 2},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: int64(observed), UpdatedReplicas: updated,
				AvailableReplicas: available, Replicas: total},
		}
	}
	for _, c := range []struct {
		name       string
		d          *appsv1.Deployment
		desired    int32
		err        error
		done       bool
		wantReason string
	}{
		{"missing", nil, 2, nil, false, multiarchv1beta1.ReasonDeploymentNotFound},
		{"bad annotation", dep(0, 2, 0, 0, 0), 0, errBad, false, multiarchv1beta1.ReasonInvalidReplicas},
		{"not scaled yet", dep(0, 2, 0, 0, 0), 2, nil, false, multiarchv1beta1.ReasonRollingOut},
		{"not observed", dep(2, 1, 2, 2, 2), 2, nil, false, multiarchv1beta1.ReasonRollingOut},
		{"starting", dep(2, 2, 2, 1, 2), 2, nil, false, multiarchv1beta1.ReasonRollingOut},
		{"old replica still there", dep(2, 2, 2, 2, 3), 2, nil, false, multiarchv1beta1.ReasonRollingOut},
		{"rolled out", dep(2, 2, 2, 2, 2), 2, nil, true, multiarchv1beta1.ReasonRolledOut},
	} {
		got := rolloutOf(c.d, c.desired, c.err)
		if got.done != c.done || got.reason != c.wantReason {
			t.Errorf("%s: got %+v, want done %v reason %s", c.name, got, c.done, c.wantReason)
		}
	}
}

var errBad = errString("bad")

type errString string

func (e errString) Error() string { return string(e) }

func TestReplicas(t *testing.T) {
	for _, c := range []struct {
		annotation *string
		want       int32
		wantErr    bool
	}{
		{nil, 1, false},
		{ptr.To("2"), 2, false},
		{ptr.To("0"), 0, true},
		{ptr.To("-1"), 0, true},
		{ptr.To("two"), 0, true},
		{ptr.To("99999999999"), 0, true},
	} {
		d := &appsv1.Deployment{}
		if c.annotation != nil {
			d.Annotations = map[string]string{placement.ReplicasAnnotation: *c.annotation}
		}
		got, err := replicasOf(d)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("%v: got %d, %v; want %d, error %v", c.annotation, got, err, c.want, c.wantErr)
		}
		// The pod template's, as an OLM bundle's Deployment carries it,
		// is read the same when the Deployment has none...
		if c.annotation != nil {
			d.Annotations = nil
			d.Spec.Template.Annotations = map[string]string{placement.ReplicasAnnotation: *c.annotation}
			got, err := replicasOf(d)
			if got != c.want || (err != nil) != c.wantErr {
				t.Errorf("%v on the template: got %d, %v; want %d, error %v", c.annotation, got, err, c.want, c.wantErr)
			}
		}
	}
	// ...and the Deployment's wins over it.
	d := &appsv1.Deployment{}
	d.Annotations = map[string]string{placement.ReplicasAnnotation: "3"}
	d.Spec.Template.Annotations = map[string]string{placement.ReplicasAnnotation: "2"}
	if got, err := replicasOf(d); got != 3 || err != nil {
		t.Errorf("both annotations: got %d, %v; want the Deployment's 3", got, err)
	}
}

func TestBindingShape(t *testing.T) {
	b := binding(placement.ControllerName, "archway-system", "uid-1")
	if b.Name != placement.ControllerName || b.RoleRef.Name != placement.ControllerName || len(b.Subjects) != 1 ||
		b.Subjects[0].Name != placement.ControllerName || b.Subjects[0].Namespace != "archway-system" {
		t.Errorf("binding: %+v", b)
	}
	if len(b.OwnerReferences) != 1 || b.OwnerReferences[0].UID != "uid-1" || b.OwnerReferences[0].BlockOwnerDeletion != nil {
		t.Errorf("owner: %+v", b.OwnerReferences)
	}
	other := b.DeepCopy()
	other.Subjects[0].Name = "archway-placement-operator"
	if sameBinding(other, b) || !sameBinding(b.DeepCopy(), b) {
		t.Error("sameBinding does not compare subjects")
	}
}
