package policy

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kupidv1alpha1 "github.com/archway-build/archway/pkg/apis/kupid/v1alpha1"
)

// A policy is merged into pods the apiserver then validates: a policy the
// pod rules would reject (an In requirement without values, a toleration
// with an unknown effect...) would make every pod it selects fail to be
// created, whatever the webhook's failurePolicy. These rules are the
// apiserver's pod rules for the fields a policy holds. The validating
// webhook enforces them when a policy is written; the mutating webhook
// checks them again and skips a policy that breaks them (one written while
// the validating webhook was not registered).

// ValidatePodSchedulingPolicy returns what is wrong with p.
func ValidatePodSchedulingPolicy(p *kupidv1alpha1.PodSchedulingPolicy) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateSelector(p.Spec.PodSelector, spec.Child("podSelector"))
	return append(errs, validateCriteria(&p.Spec.SchedulingCriteria, spec)...)
}

// ValidateClusterPodSchedulingPolicy returns what is wrong with p.
func ValidateClusterPodSchedulingPolicy(p *kupidv1alpha1.ClusterPodSchedulingPolicy) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateSelector(p.Spec.NamespaceSelector, spec.Child("namespaceSelector"))
	errs = append(errs, validateSelector(p.Spec.PodSelector, spec.Child("podSelector"))...)
	return append(errs, validateCriteria(&p.Spec.SchedulingCriteria, spec)...)
}

func validateSelector(s *metav1.LabelSelector, path *field.Path) field.ErrorList {
	return metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, path)
}

func validateCriteria(c *kupidv1alpha1.SchedulingCriteria, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k, v := range c.NodeSelector {
		p := path.Child("nodeSelector").Key(k)
		errs = append(errs, metav1validation.ValidateLabelName(k, p)...)
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p, v, msg))
		}
	}
	if c.NodeName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(c.NodeName) {
			errs = append(errs, field.Invalid(path.Child("nodeName"), c.NodeName, msg))
		}
	}
	if c.SchedulerName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(c.SchedulerName) {
			errs = append(errs, field.Invalid(path.Child("schedulerName"), c.SchedulerName, msg))
		}
	}
	for i, t := range c.Tolerations {
		errs = append(errs, validateToleration(t, path.Child("tolerations").Index(i))...)
	}
	if c.Affinity != nil {
		errs = append(errs, validateAffinity(c.Affinity, path.Child("affinity"))...)
	}
	return errs
}

func validateToleration(t corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, path.Child("key"))...)
	} else if t.Operator != corev1.TolerationOpExists {
		errs = append(errs, field.Invalid(path.Child("operator"), t.Operator, "operator must be Exists when key is empty, which means tolerate every taint"))
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(path.Child("value"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(path.Child("value"), t.Value, "value must be empty when operator is Exists"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("operator"), t.Operator, []string{string(corev1.TolerationOpEqual), string(corev1.TolerationOpExists)}))
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		errs = append(errs, field.NotSupported(path.Child("effect"), t.Effect, []string{
			string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute),
		}))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(path.Child("effect"), t.Effect, "effect must be NoExecute when tolerationSeconds is set"))
	}
	return errs
}

func validateAffinity(a *corev1.Affinity, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		p := path.Child("nodeAffinity")
		if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			rp := p.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
			if len(r.NodeSelectorTerms) == 0 {
				errs = append(errs, field.Required(rp, "at least one node selector term"))
			}
			for i, t := range r.NodeSelectorTerms {
				errs = append(errs, validateNodeSelectorTerm(t, rp.Index(i))...)
			}
		}
		for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			tp := p.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			errs = append(errs, validateWeight(t.Weight, tp.Child("weight"))...)
			errs = append(errs, validateNodeSelectorTerm(t.Preference, tp.Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, path.Child("podAffinity"))...)
	}
	if paa := a.PodAntiAffinity; paa != nil {
		errs = append(errs, validatePodAffinityTerms(paa.RequiredDuringSchedulingIgnoredDuringExecution, paa.PreferredDuringSchedulingIgnoredDuringExecution, path.Child("podAntiAffinity"))...)
	}
	return errs
}

func validateWeight(w int32, path *field.Path) field.ErrorList {
	if w < 1 || w > 100 {
		return field.ErrorList{field.Invalid(path, w, "must be from 1 to 100")}
	}
	return nil
}

func validateNodeSelectorTerm(t corev1.NodeSelectorTerm, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, r := range t.MatchExpressions {
		p := path.Child("matchExpressions").Index(i)
		errs = append(errs, metav1validation.ValidateLabelName(r.Key, p.Child("key"))...)
		errs = append(errs, validateNodeSelectorOperator(r, p)...)
	}
	for i, r := range t.MatchFields {
		p := path.Child("matchFields").Index(i)
		if r.Key != "metadata.name" {
			errs = append(errs, field.NotSupported(p.Child("key"), r.Key, []string{"metadata.name"}))
		}
		if r.Operator != corev1.NodeSelectorOpIn && r.Operator != corev1.NodeSelectorOpNotIn {
			errs = append(errs, field.NotSupported(p.Child("operator"), r.Operator, []string{string(corev1.NodeSelectorOpIn), string(corev1.NodeSelectorOpNotIn)}))
		}
		if len(r.Values) != 1 {
			errs = append(errs, field.Invalid(p.Child("values"), r.Values, "must have exactly one value, a node name"))
		}
	}
	return errs
}

func validateNodeSelectorOperator(r corev1.NodeSelectorRequirement, path *field.Path) field.ErrorList {
	values := path.Child("values")
	switch r.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(r.Values) == 0 {
			return field.ErrorList{field.Required(values, "operator "+string(r.Operator)+" needs at least one value")}
		}
		var errs field.ErrorList
		for i, v := range r.Values {
			for _, msg := range validation.IsValidLabelValue(v) {
				errs = append(errs, field.Invalid(values.Index(i), v, msg))
			}
		}
		return errs
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(r.Values) > 0 {
			return field.ErrorList{field.Forbidden(values, "operator "+string(r.Operator)+" takes no values")}
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(r.Values) != 1 {
			return field.ErrorList{field.Required(values, "operator "+string(r.Operator)+" needs exactly one value, an integer")}
		}
		if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
			return field.ErrorList{field.Invalid(values.Index(0), r.Values[0], "must be an integer for operator "+string(r.Operator))}
		}
	default:
		return field.ErrorList{field.NotSupported(path.Child("operator"), r.Operator, []string{"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})}
	}
	return nil
}

func validatePodAffinityTerms(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range required {
		errs = append(errs, validatePodAffinityTerm(t, path.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
	}
	for i, t := range preferred {
		p := path.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		errs = append(errs, validateWeight(t.Weight, p.Child("weight"))...)
		errs = append(errs, validatePodAffinityTerm(t.PodAffinityTerm, p.Child("podAffinityTerm"))...)
	}
	return errs
}

func validatePodAffinityTerm(t corev1.PodAffinityTerm, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.TopologyKey == "" {
		errs = append(errs, field.Required(path.Child("topologyKey"), "a node label key, e.g. kubernetes.io/hostname"))
	} else {
		errs = append(errs, metav1validation.ValidateLabelName(t.TopologyKey, path.Child("topologyKey"))...)
	}
	// The apiserver folds matchLabelKeys into labelSelector before
	// admission, so it would never see keys a webhook adds.
	if len(t.MatchLabelKeys) > 0 {
		errs = append(errs, field.Forbidden(path.Child("matchLabelKeys"), "not supported in a scheduling policy: the apiserver resolves it before the policy is merged"))
	}
	if len(t.MismatchLabelKeys) > 0 {
		errs = append(errs, field.Forbidden(path.Child("mismatchLabelKeys"), "not supported in a scheduling policy: the apiserver resolves it before the policy is merged"))
	}
	errs = append(errs, validateSelector(t.LabelSelector, path.Child("labelSelector"))...)
	errs = append(errs, validateSelector(t.NamespaceSelector, path.Child("namespaceSelector"))...)
	for i, ns := range t.Namespaces {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(path.Child("namespaces").Index(i), ns, msg))
		}
	}
	return errs
}
