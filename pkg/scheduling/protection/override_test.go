package protection

import (
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

var t0 = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

func withOverride(cfg *schedulingv1alpha1.ControlPlaneProtection, mode schedulingv1alpha1.GroupMode, until time.Time) *schedulingv1alpha1.ControlPlaneProtection {
	cfg.Spec.Override = &schedulingv1alpha1.ProtectionOverride{Mode: mode, Until: metav1.NewTime(until)}
	return cfg
}

func TestEffectiveMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *schedulingv1alpha1.ControlPlaneProtection
		want schedulingv1alpha1.GroupMode
		fail admissionregistrationv1.FailurePolicyType
	}{
		{"no override", config(schedulingv1alpha1.ModeEnable), schedulingv1alpha1.ModeEnable, admissionregistrationv1.Fail},
		{"Disable until later", withOverride(config(schedulingv1alpha1.ModeEnable), schedulingv1alpha1.ModeDisable, t0.Add(time.Hour)), schedulingv1alpha1.ModeDisable, admissionregistrationv1.Ignore},
		{"Inform until later", withOverride(config(schedulingv1alpha1.ModeEnable), schedulingv1alpha1.ModeInform, t0.Add(time.Second)), schedulingv1alpha1.ModeInform, admissionregistrationv1.Ignore},
		{"lapsed at until", withOverride(config(schedulingv1alpha1.ModeEnable), schedulingv1alpha1.ModeDisable, t0), schedulingv1alpha1.ModeEnable, admissionregistrationv1.Fail},
		{"more than 24h ahead is not followed", withOverride(config(schedulingv1alpha1.ModeEnable), schedulingv1alpha1.ModeDisable, t0.Add(25*time.Hour)), schedulingv1alpha1.ModeEnable, admissionregistrationv1.Fail},
		{"never stricter than the group", withOverride(config(schedulingv1alpha1.ModeDisable), schedulingv1alpha1.ModeInform, t0.Add(time.Hour)), schedulingv1alpha1.ModeDisable, admissionregistrationv1.Ignore},
	} {
		eff := Effective(tc.cfg, t0)
		if got := eff.Spec.Groups[0].Mode; got != tc.want {
			t.Errorf("%s: effective mode %s, want %s", tc.name, got, tc.want)
		}
		if got := FailurePolicy(eff); got != tc.fail {
			t.Errorf("%s: failurePolicy %s, want %s", tc.name, got, tc.fail)
		}
	}
	cfg := withOverride(config(schedulingv1alpha1.ModeEnable), schedulingv1alpha1.ModeDisable, t0.Add(time.Hour))
	Effective(cfg, t0)
	if cfg.Spec.Groups[0].Mode != schedulingv1alpha1.ModeEnable {
		t.Errorf("Effective changed its argument")
	}
}

func TestValidateOverride(t *testing.T) {
	base := config(schedulingv1alpha1.ModeEnable)
	for _, tc := range []struct {
		name  string
		cfg   *schedulingv1alpha1.ControlPlaneProtection
		old   *schedulingv1alpha1.ControlPlaneProtection
		error string
	}{
		{"none", base, nil, ""},
		{"an hour", withOverride(base.DeepCopy(), schedulingv1alpha1.ModeDisable, t0.Add(time.Hour)), nil, ""},
		{"exactly 24h", withOverride(base.DeepCopy(), schedulingv1alpha1.ModeDisable, t0.Add(24*time.Hour)), nil, ""},
		{"no until", withOverride(base.DeepCopy(), schedulingv1alpha1.ModeDisable, time.Time{}), nil, "spec.override.until is required"},
		{"in the past", withOverride(base.DeepCopy(), schedulingv1alpha1.ModeDisable, t0.Add(-time.Minute)), nil, "is not in the future"},
		{"48h", withOverride(base.DeepCopy(), schedulingv1alpha1.ModeDisable, t0.Add(48*time.Hour)), nil, "is 48h0m0s ahead: an emergency override may last at most 24h0m0s; set 2026-01-03T15:04:05Z or earlier"},
		{
			"an expired override left as it was does not block other edits",
			withOverride(config(schedulingv1alpha1.ModeInform), schedulingv1alpha1.ModeDisable, t0.Add(-time.Hour)),
			withOverride(base.DeepCopy(), schedulingv1alpha1.ModeDisable, t0.Add(-time.Hour)), "",
		},
		{
			"a changed one is checked",
			withOverride(base.DeepCopy(), schedulingv1alpha1.ModeDisable, t0.Add(30*time.Hour)),
			withOverride(base.DeepCopy(), schedulingv1alpha1.ModeDisable, t0.Add(time.Hour)), "at most 24h0m0s",
		},
	} {
		err := ValidateOverride(tc.cfg, tc.old, t0)
		switch {
		case tc.error == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.error != "" && (err == nil || !strings.Contains(err.Error(), tc.error)):
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.error)
		}
	}
}

func TestStatus(t *testing.T) {
	cond := func(s schedulingv1alpha1.ControlPlaneProtectionStatus, typ string) metav1.Condition {
		c := meta.FindStatusCondition(s.Conditions, typ)
		if c == nil {
			t.Fatalf("no %s condition in %+v", typ, s.Conditions)
		}
		return *c
	}
	cfg := config(schedulingv1alpha1.ModeEnable, "system:kube-scheduler")
	cfg.Generation = 3
	s := Status(cfg, testNodes, t0)
	if len(s.Groups) != 1 || s.Groups[0].Mode != schedulingv1alpha1.ModeEnable || s.Groups[0].ProtectedNodes != 1 || s.ObservedGeneration != 3 {
		t.Errorf("status %+v", s)
	}
	if c := cond(s, "Enforcing"); c.Status != metav1.ConditionTrue || c.Reason != "ModeEnable" {
		t.Errorf("Enforcing %+v", c)
	}
	if c := cond(s, "Ready"); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v", c)
	}

	withOverride(cfg, schedulingv1alpha1.ModeDisable, t0.Add(time.Minute))
	cfg.Status = s
	s = Status(cfg, testNodes, t0)
	if c := cond(s, "Enforcing"); c.Status != metav1.ConditionFalse || c.Reason != "Overridden" {
		t.Errorf("Enforcing under the override %+v", c)
	}
	if c := cond(s, "Overridden"); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "until 2026-01-02T15:05:05Z") {
		t.Errorf("Overridden %+v", c)
	}
	if s.Groups[0].Mode != schedulingv1alpha1.ModeDisable {
		t.Errorf("mode in effect %s, want Disable", s.Groups[0].Mode)
	}
	cfg.Status = s
	s = Status(cfg, testNodes, t0.Add(time.Minute))
	if c := cond(s, "Overridden"); c.Status != metav1.ConditionFalse || c.Reason != "Expired" {
		t.Errorf("Overridden after until %+v", c)
	}
	if c := cond(s, "Enforcing"); c.Status != metav1.ConditionTrue {
		t.Errorf("Enforcing after until %+v", c)
	}

	none := config(schedulingv1alpha1.ModeEnable)
	none.Spec.Groups[0].LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"role": "nothing"}}
	if c := cond(Status(none, testNodes, t0), "Ready"); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "selects no node") {
		t.Errorf("Ready with no protected node %+v", c)
	}
}

func TestAddDenials(t *testing.T) {
	d := func(sec int, pod string) *schedulingv1alpha1.Denial {
		return &schedulingv1alpha1.Denial{Time: metav1.NewTime(t0.Add(time.Duration(sec) * time.Second)), Pod: pod}
	}
	had := &schedulingv1alpha1.DenialStatus{Count: 5, Last: d(10, "newer")}
	got := addDenials(had, 2, d(5, "older"))
	if got.Count != 7 || got.Last.Pod != "newer" {
		t.Errorf("adding older denials: %+v", got)
	}
	if got := addDenials(had, 1, d(11, "newest")); got.Count != 6 || got.Last.Pod != "newest" {
		t.Errorf("adding a newer denial: %+v", got)
	}
	if got := addDenials(nil, 0, nil); got != nil {
		t.Errorf("nothing to add: %+v", got)
	}
	c := newDenialCounter()
	c.record(schedulingv1alpha1.Denial{User: strings.Repeat("u", 300), Pod: "p"})
	n, last := c.take()
	if n != 1 || len(last.User) != 253 {
		t.Errorf("counter took %d, user of %d characters", n, len(last.User))
	}
	c.giveBack(n, last)
	if n, _ := c.take(); n != 1 {
		t.Errorf("given back %d, want 1", n)
	}
}
