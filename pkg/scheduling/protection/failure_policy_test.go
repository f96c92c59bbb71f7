package protection

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

func TestFailurePolicy(t *testing.T) {
	withGroups := func(modes ...schedulingv1alpha1.GroupMode) *schedulingv1alpha1.ControlPlaneProtection {
		cfg := &schedulingv1alpha1.ControlPlaneProtection{}
		for _, m := range modes {
			cfg.Spec.Groups = append(cfg.Spec.Groups, schedulingv1alpha1.ProtectionGroup{Name: schedulingv1alpha1.ControlPlane, Mode: m})
		}
		return cfg
	}
	for _, tc := range []struct {
		name string
		cfg  *schedulingv1alpha1.ControlPlaneProtection
		want admissionregistrationv1.FailurePolicyType
	}{
		{"no ControlPlaneProtection", nil, admissionregistrationv1.Ignore},
		{"no group", withGroups(), admissionregistrationv1.Ignore},
		{"Disable", withGroups(schedulingv1alpha1.ModeDisable), admissionregistrationv1.Ignore},
		{"mode unset (Disable)", withGroups(""), admissionregistrationv1.Ignore},
		{"Inform", withGroups(schedulingv1alpha1.ModeInform), admissionregistrationv1.Ignore},
		{"Enable", withGroups(schedulingv1alpha1.ModeEnable), admissionregistrationv1.Fail},
		{"one group of several in Enable", withGroups(schedulingv1alpha1.ModeInform, schedulingv1alpha1.ModeEnable), admissionregistrationv1.Fail},
	} {
		if got := FailurePolicy(tc.cfg); got != tc.want {
			t.Errorf("%s: FailurePolicy = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestSetFailurePolicy(t *testing.T) {
	vwc := func(pods *admissionregistrationv1.FailurePolicyType) *admissionregistrationv1.ValidatingWebhookConfiguration {
		return &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: PodsWebhookName, FailurePolicy: pods},
			{Name: "bindings.control-plane-protection.scheduling.archway.dev", FailurePolicy: ptr.To(admissionregistrationv1.Ignore)},
		}}
	}
	fail, ignore := admissionregistrationv1.Fail, admissionregistrationv1.Ignore
	for _, tc := range []struct {
		name                  string
		in                    *admissionregistrationv1.ValidatingWebhookConfiguration
		set                   admissionregistrationv1.FailurePolicyType
		wantFound, wantChange bool
	}{
		{"Ignore to Fail", vwc(&ignore), fail, true, true},
		{"Fail to Ignore", vwc(&fail), ignore, true, true},
		{"already Ignore", vwc(&ignore), ignore, true, false},
		{"unset to Ignore", vwc(nil), ignore, true, true},
		{"no pods webhook", &admissionregistrationv1.ValidatingWebhookConfiguration{Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "other"}}}, fail, false, false},
	} {
		found, changed := setFailurePolicy(tc.in, tc.set)
		if found != tc.wantFound || changed != tc.wantChange {
			t.Errorf("%s: found %v changed %v, want %v %v", tc.name, found, changed, tc.wantFound, tc.wantChange)
		}
		if !found {
			continue
		}
		if got := *tc.in.Webhooks[0].FailurePolicy; got != tc.set {
			t.Errorf("%s: pods webhook failurePolicy %s, want %s", tc.name, got, tc.set)
		}
		if got := *tc.in.Webhooks[1].FailurePolicy; got != ignore {
			t.Errorf("%s: bindings webhook failurePolicy %s, want it left Ignore", tc.name, got)
		}
	}
}
