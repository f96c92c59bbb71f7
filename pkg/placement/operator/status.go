package operator

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// rollout is what one operand Deployment shows: whether every replica
// asked for is up to date and available, and why not.
type rollout struct {
	done           bool
	reason, detail string
}

// rolloutOf judges d against the desired replicas. d is nil when the
// Deployment does not exist; replicasErr says why the desired count could
// not be read.
func rolloutOf(d *appsv1.Deployment, desired int32, replicasErr error) rollout {
	switch {
	case d == nil:
		return rollout{reason: multiarchv1beta1.ReasonDeploymentNotFound, detail: "the Deployment does not exist"}
	case replicasErr != nil:
		return rollout{reason: multiarchv1beta1.ReasonInvalidReplicas, detail: replicasErr.Error()}
	case d.Spec.Replicas == nil || *d.Spec.Replicas != desired:
		return rollout{reason: multiarchv1beta1.ReasonRollingOut, detail: fmt.Sprintf("scaling to %d replicas", desired)}
	case d.Status.ObservedGeneration < d.Generation:
		return rollout{reason: multiarchv1beta1.ReasonRollingOut, detail: "the Deployment controller has not seen the latest change"}
	case d.Status.UpdatedReplicas < desired || d.Status.AvailableReplicas < desired || d.Status.Replicas > desired:
		return rollout{reason: multiarchv1beta1.ReasonRollingOut, detail: fmt.Sprintf("%d of %d replicas up to date, %d available",
			d.Status.UpdatedReplicas, desired, d.Status.AvailableReplicas)}
	}
	return rollout{done: true, reason: multiarchv1beta1.ReasonRolledOut, detail: fmt.Sprintf("%d replicas up to date and available", desired)}
}

// setRolloutCondition sets one NotRolledOut condition from r; it reports
// whether the conditions changed.
func setRolloutCondition(conds *[]metav1.Condition, condType, deployment string, r rollout, generation int64) bool {
	status := metav1.ConditionTrue
	if r.done {
		status = metav1.ConditionFalse
	}
	return meta.SetStatusCondition(conds, metav1.Condition{
		Type: condType, Status: status, Reason: r.reason, ObservedGeneration: generation,
		Message: "Deployment " + deployment + ": " + r.detail,
	})
}

// setStopping sets Deprovisioning while the operand is being stopped; it
// reports whether the conditions changed.
func setStopping(conds *[]metav1.Condition, detail string, generation int64) bool {
	return meta.SetStatusCondition(conds, metav1.Condition{
		Type: multiarchv1beta1.ConditionDeprovisioning, Status: metav1.ConditionTrue, Reason: multiarchv1beta1.ReasonStoppingOperand,
		Message: "The gated pods are released; " + detail, ObservedGeneration: generation,
	})
}
