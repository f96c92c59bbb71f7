package config

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

func TestSetConfigConditions(t *testing.T) {
	type want struct {
		condition string
		status    metav1.ConditionStatus
		reason    string
	}
	tests := []struct {
		name    string
		syncErr error
		want    []want
	}{
		{name: "in sync", want: []want{
			{multiarchv1beta1.ConditionAvailable, metav1.ConditionTrue, multiarchv1beta1.ReasonReconciled},
			{multiarchv1beta1.ConditionProgressing, metav1.ConditionFalse, multiarchv1beta1.ReasonReconciled},
			{multiarchv1beta1.ConditionDegraded, metav1.ConditionFalse, multiarchv1beta1.ReasonReconciled},
		}},
		{name: "no webhook configuration", syncErr: &webhookConfigError{reason: multiarchv1beta1.ReasonWebhookConfigurationNotFound, msg: "gone"}, want: []want{
			{multiarchv1beta1.ConditionAvailable, metav1.ConditionFalse, multiarchv1beta1.ReasonWebhookConfigurationNotFound},
			{multiarchv1beta1.ConditionProgressing, metav1.ConditionTrue, multiarchv1beta1.ReasonWebhookConfigurationNotFound},
			{multiarchv1beta1.ConditionDegraded, metav1.ConditionTrue, multiarchv1beta1.ReasonWebhookConfigurationNotFound},
		}},
		{name: "other error", syncErr: errors.New("boom"), want: []want{
			{multiarchv1beta1.ConditionAvailable, metav1.ConditionFalse, multiarchv1beta1.ReasonWebhookConfigurationSyncFailed},
			{multiarchv1beta1.ConditionDegraded, metav1.ConditionTrue, multiarchv1beta1.ReasonWebhookConfigurationSyncFailed},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := &multiarchv1beta1.ClusterPodPlacementConfigStatus{Conditions: []metav1.Condition{
				{Type: multiarchv1beta1.ConditionDeprovisioning, Status: metav1.ConditionTrue, Reason: "UngatingPods"},
			}}
			setConfigConditions(status, 7, tt.syncErr)
			if status.ObservedGeneration != 7 {
				t.Errorf("observedGeneration %d", status.ObservedGeneration)
			}
			if meta.FindStatusCondition(status.Conditions, multiarchv1beta1.ConditionDeprovisioning) != nil {
				t.Error("a live config is not deprovisioning")
			}
			for _, w := range tt.want {
				c := meta.FindStatusCondition(status.Conditions, w.condition)
				if c == nil || c.Status != w.status || c.Reason != w.reason || c.ObservedGeneration != 7 {
					t.Errorf("%s = %+v, want %s %s", w.condition, c, w.status, w.reason)
				}
			}
			before := status.DeepCopy()
			if !equalStatus(before, status) {
				t.Error("equalStatus of equal statuses")
			}
			setConfigConditions(status, 8, tt.syncErr)
			if equalStatus(before, status) {
				t.Error("equalStatus missed a new generation")
			}
		})
	}
}

func TestVerbosity(t *testing.T) {
	for level, want := range map[string]int{"": 0, "Normal": 0, "Debug": 1, "Trace": 2, "TraceAll": 3} {
		if got := verbosity(multiarchv1beta1.LogVerbosityLevel(level)); got != want {
			t.Errorf("verbosity(%q) = %d, want %d", level, got, want)
		}
	}
}
