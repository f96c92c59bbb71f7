package protection

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

// OverrideState is where an override stands at a time.
type OverrideState string

const (
	// OverrideNone: the spec has no override.
	OverrideNone OverrideState = "None"
	// OverrideInEffect: the override is in effect until its until.
	OverrideInEffect OverrideState = "InEffect"
	// OverrideExpired: its until has passed; the groups' modes apply.
	OverrideExpired OverrideState = "Expired"
	// OverrideTooFarAhead: its until is more than MaxOverride ahead, which
	// the config webhook refuses when it is written; one that got past it
	// (written while the webhook was down) is not followed.
	OverrideTooFarAhead OverrideState = "TooFarAhead"
)

// Override says where cfg's override stands at now.
func Override(cfg *schedulingv1alpha1.ControlPlaneProtection, now time.Time) OverrideState {
	if cfg == nil || cfg.Spec.Override == nil {
		return OverrideNone
	}
	until := cfg.Spec.Override.Until.Time
	switch {
	case !now.Before(until):
		return OverrideExpired
	case until.After(now.Add(schedulingv1alpha1.MaxOverride)):
		return OverrideTooFarAhead
	default:
		return OverrideInEffect
	}
}

// strictness orders the modes: Disable < Inform < Enable.
func strictness(m schedulingv1alpha1.GroupMode) int {
	switch m {
	case schedulingv1alpha1.ModeEnable:
		return 2
	case schedulingv1alpha1.ModeInform:
		return 1
	default:
		return 0
	}
}

// EffectiveMode is the mode group g follows at now: the override's while it
// is in effect and less strict than g's own, g's otherwise (Disable when
// unset).
func EffectiveMode(cfg *schedulingv1alpha1.ControlPlaneProtection, g schedulingv1alpha1.ProtectionGroup, now time.Time) schedulingv1alpha1.GroupMode {
	mode := g.Mode
	if mode == "" {
		mode = schedulingv1alpha1.ModeDisable
	}
	if Override(cfg, now) == OverrideInEffect && strictness(cfg.Spec.Override.Mode) < strictness(mode) {
		return cfg.Spec.Override.Mode
	}
	return mode
}

// Effective is cfg as it applies at now: every group has its effective
// mode. cfg is not changed (the result shares all but the groups with it);
// nil stays nil.
func Effective(cfg *schedulingv1alpha1.ControlPlaneProtection, now time.Time) *schedulingv1alpha1.ControlPlaneProtection {
	if cfg == nil || Override(cfg, now) != OverrideInEffect {
		return cfg
	}
	out := *cfg
	out.Spec.Groups = make([]schedulingv1alpha1.ProtectionGroup, len(cfg.Spec.Groups))
	for i, g := range cfg.Spec.Groups {
		g.Mode = EffectiveMode(cfg, g, now)
		out.Spec.Groups[i] = g
	}
	return &out
}

// nextChange is when the modes cfg's groups follow change next by the
// clock alone: its override's until while it is in effect (zero when
// nothing changes with time).
func nextChange(cfg *schedulingv1alpha1.ControlPlaneProtection, now time.Time) time.Time {
	if Override(cfg, now) == OverrideInEffect {
		return cfg.Spec.Override.Until.Time
	}
	return time.Time{}
}

// ValidateOverride checks an override being written at now (old is the
// object before an update, nil on create): one that is new or changed must
// end in the future and at most MaxOverride ahead. An unchanged override
// passes, so that an expired one never blocks other edits.
func ValidateOverride(cfg, old *schedulingv1alpha1.ControlPlaneProtection, now time.Time) error {
	o := cfg.Spec.Override
	if o == nil || (old != nil && equality.Semantic.DeepEqual(o, old.Spec.Override)) {
		return nil
	}
	until := o.Until.Time
	latest := now.Add(schedulingv1alpha1.MaxOverride).UTC().Truncate(time.Second)
	switch {
	case until.IsZero():
		return fmt.Errorf("spec.override.until is required: an emergency override must lapse by itself, at most %s ahead (e.g. %s)",
			schedulingv1alpha1.MaxOverride, latest.Format(time.RFC3339))
	case !now.Before(until):
		return fmt.Errorf("spec.override.until %s is not in the future (now %s): set a time at most %s ahead, e.g. %s, or remove spec.override",
			until.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), schedulingv1alpha1.MaxOverride, latest.Format(time.RFC3339))
	case until.After(now.Add(schedulingv1alpha1.MaxOverride)):
		return fmt.Errorf("spec.override.until %s is %s ahead: an emergency override may last at most %s; set %s or earlier and renew it while the emergency lasts",
			until.UTC().Format(time.RFC3339), until.Sub(now).Round(time.Minute), schedulingv1alpha1.MaxOverride, latest.Format(time.RFC3339))
	}
	return nil
}
