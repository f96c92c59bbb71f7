package podcontroller

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/image"
)

// Outcomes of handling one gated pod, for metrics and tests.
const (
	outcomePlaced          = "placed"
	outcomeConflict        = "predicates-conflict"
	outcomeNoSupportedArch = "no-supported-arch"
	outcomeFallback        = "fallback"
	outcomeInspectionError = "inspection-error"
	outcomeIgnored         = "ignored"
	outcomeReleased        = "released"
)

// maxEventMessage is the longest note events.k8s.io/v1 accepts.
const maxEventMessage = 1024

// decision is what to do with a gated pod: the pod to write (a modified
// copy, gate removed) and the one event to record once the write succeeded.
type decision struct {
	Outcome   string
	Pod       *corev1.Pod
	EventType string
	Reason    string
	Message   string
	// skipped are the configured preferences not applied, one event each.
	skipped []sourceEntry
	// appliedConfigs name the PodPlacementConfigs a preferred term was
	// added from, for their status.
	appliedConfigs []string
}

// applyPreferences adds the configured preferences to out, records their
// sources in the annotation and labels the pod preferred-node-affinity
// set when any was added. It returns whether any was added.
func applyPreferences(out *corev1.Pod, pol policy, d *decision) bool {
	affinity, added, entries := withPreferences(out.Spec.Affinity, pol, hasArchPreference(out))
	switch {
	case added:
		out.Spec.Affinity = affinity
		placement.SetLabel(out, placement.PreferredNodeAffinityLabel, placement.LabelValueSet)
	case len(pol.Weights) > 0:
		placement.SetLabel(out, placement.PreferredNodeAffinityLabel, placement.LabelValueNotSet)
	}
	if len(entries) > 0 {
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[placement.PreferredAffinitySourcesAnnotation] = sourcesAnnotation(entries)
	}
	for _, e := range entries {
		if e.skipped != "" {
			d.skipped = append(d.skipped, e)
		} else if name, ok := strings.CutPrefix(e.Source, sourcePodPrefix); ok && added && !slices.Contains(d.appliedConfigs, name) {
			d.appliedConfigs = append(d.appliedConfigs, name)
		}
	}
	return added
}

// imageResult is what inspecting one of a pod's images found: the
// architectures it has for the pod's OS, or an error.
type imageResult struct {
	image string
	archs sets.Set[string]
	err   error
}

// podImages returns the unique images of the pod's init and app
// containers, in order, and whether any container using each pulls with
// policy Always.
func podImages(pod *corev1.Pod) ([]string, map[string]bool) {
	var images []string
	always := map[string]bool{}
	add := func(cs []corev1.Container) {
		for _, c := range cs {
			if _, seen := always[c.Image]; !seen {
				images = append(images, c.Image)
				always[c.Image] = false
			}
			if c.ImagePullPolicy == corev1.PullAlways {
				always[c.Image] = true
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	return images, always
}

// podOS is the OS the pod's images must have: spec.os.name, default linux.
func podOS(pod *corev1.Pod) string {
	if pod.Spec.OS != nil && pod.Spec.OS.Name != "" {
		return string(pod.Spec.OS.Name)
	}
	return "linux"
}

// preflight decides what needs no inspection: a pod that pins
// kubernetes.io/arch in its nodeSelector is released with no required
// term, with the configured preferences added when they apply (as the
// multiarch tuning operator scores such a pod); a pod whose every required
// term constrains the architecture is released as it is unless preferences
// are to be added (the webhook decides the same at admission; this covers
// pods gated by others). ok is false when the pod's images must be
// inspected.
func preflight(pod *corev1.Pod, pol policy) (decision, bool) {
	if PinsArch(pod) {
		if !WouldAddPreferences(pod, pol) {
			return release(pod, outcomeIgnored, corev1.EventTypeNormal, placement.EventGatedPodIgnored,
				"The gated pod now pins "+placement.ArchLabel+" in its nodeSelector and no longer needs architecture-aware placement; scheduling gate removed"), true
		}
		d := release(pod, outcomeConflict, corev1.EventTypeNormal, placement.EventPredicatesConflict,
			"The pod pins "+placement.ArchLabel+" in its nodeSelector: no required term added; added the preferred architectures of nodeAffinityScoring; scheduling gate removed")
		applyPreferences(d.Pod, pol, &d)
		return d, true
	}
	if AllTermsConstrainArch(pod) && !WouldAddPreferences(pod, pol) {
		return release(pod, outcomeConflict, corev1.EventTypeNormal, placement.EventPredicatesConflict,
			"All the required node selector terms already constrain "+placement.ArchLabel+"; left unchanged and scheduling gate removed"), true
	}
	return decision{}, false
}

// release removes the gate and changes nothing else but labels.
func release(pod *corev1.Pod, outcome, eventType, reason, message string) decision {
	out := pod.DeepCopy()
	placement.RemoveGate(out)
	placement.SetLabel(out, placement.SchedulingGateLabel, placement.SchedulingGateLabelRemoved)
	placement.SetLabel(out, placement.NodeAffinityLabel, placement.LabelValueNotSet)
	return decision{Outcome: outcome, Pod: out, EventType: eventType, Reason: reason, Message: truncate(message)}
}

// decide places a pod from the inspection of all its images. Any error
// means the retries are over (after failures failed inspections): the pod
// goes to the fallback architecture when one is configured, else it is
// released unchanged.
func decide(pod *corev1.Pod, pol policy, results []imageResult, failures int) decision {
	if err := inspectionError(results); err != nil {
		if blockedImage(results) {
			// No node pulls the image: the fallback architecture would
			// place the pod nowhere better.
			pol.fallback = ""
		}
		d := decideAfterError(pod, pol, err)
		labelInspectionError(d.Pod, err, failures)
		return d
	}
	var archs sets.Set[string]
	for _, r := range results {
		if r.archs.Has(image.AnyArchitecture) {
			continue // an operator bundle: it constrains nothing
		}
		if archs == nil {
			archs = r.archs.Clone()
		} else {
			archs = archs.Intersection(r.archs)
		}
	}
	if archs == nil {
		d := release(pod, outcomeReleased, corev1.EventTypeNormal, placement.EventSchedGateRemovalSuccess,
			"Every image of the pod runs on any architecture (operator bundle images); required node affinity unchanged, scheduling gate removed")
		applyPreferences(d.Pod, pol, &d)
		return d
	}
	out := pod.DeepCopy()
	placement.RemoveGate(out)
	placement.SetLabel(out, placement.SchedulingGateLabel, placement.SchedulingGateLabelRemoved)
	if archs.Len() == 0 {
		affinity, changed := withRequirement(out.Spec.Affinity, noSupportedArchRequirement())
		out.Spec.Affinity = affinity
		placement.SetLabel(out, placement.NodeAffinityLabel, valueSet(changed))
		placement.SetLabel(out, placement.NoSupportedArchLabel, "")
		return decision{
			Outcome: outcomeNoSupportedArch, Pod: out, EventType: corev1.EventTypeWarning, Reason: placement.EventNoSupportedArchitectures,
			Message: truncate("Pod cannot be scheduled: its container images have no " + podOS(pod) + " architecture in common (" + describeResults(results) + ")"),
		}
	}
	affinity, changed := withRequirement(out.Spec.Affinity, archRequirement(archs))
	if changed {
		out.Spec.Affinity = affinity
	}
	placement.SetLabel(out, placement.NodeAffinityLabel, valueSet(changed))
	var d decision
	preferred := applyPreferences(out, pol, &d)
	labelArchitectures(out, archs)
	d.Outcome, d.Pod, d.EventType, d.Reason = outcomePlaced, out, corev1.EventTypeNormal, placement.EventPredicateSet
	d.Message = "Set the supported architectures to " + fmt.Sprint(sets.List(archs))
	switch {
	case !changed && HasEmptyTerm(pod):
		d.Outcome, d.Reason, d.EventType = outcomeConflict, placement.EventPredicatesConflict, corev1.EventTypeWarning
		d.Message = "Every required node selector term constrains " + placement.ArchLabel + " or is empty; an empty term matches no node " +
			"and the apiserver accepts no addition to it on a gated pod: the pod's node affinity is unchanged and matches only through its own terms"
	case !changed:
		d.Outcome, d.Reason = outcomeConflict, placement.EventPredicatesConflict
		d.Message = "All the required node selector terms already constrain " + placement.ArchLabel + "; left unchanged"
	}
	if preferred {
		d.Message += "; added the preferred architectures of nodeAffinityScoring"
	}
	d.Message = truncate(d.Message + "; scheduling gate removed")
	return d
}

func decideAfterError(pod *corev1.Pod, pol policy, err error) decision {
	if pol.fallback != "" {
		out := pod.DeepCopy()
		placement.RemoveGate(out)
		affinity, changed := withRequirement(out.Spec.Affinity, archRequirement(sets.New(pol.fallback)))
		out.Spec.Affinity = affinity
		placement.SetLabel(out, placement.SchedulingGateLabel, placement.SchedulingGateLabelRemoved)
		placement.SetLabel(out, placement.NodeAffinityLabel, valueSet(changed))
		placement.SetLabel(out, placement.FallbackArchLabel, pol.fallback)
		if changed {
			// The pod is now required to run on the fallback architecture:
			// it is labelled as any pod placed on one architecture is, so
			// that selectors by architecture find it. Where every required
			// term already constrained the architecture, the fallback was
			// not written and the pod's own terms decide: no label claims
			// an architecture then.
			labelArchitectures(out, sets.New(pol.fallback))
		}
		d := decision{Outcome: outcomeFallback, Pod: out, EventType: corev1.EventTypeWarning, Reason: placement.EventFallbackPredicateSet,
			Message: truncate("Image inspection failed; set the node affinity to the fallback architecture " + pol.fallback +
				" and removed the scheduling gate. Registry error: " + err.Error())}
		// The images' architectures are unknown: every configured
		// preference applies.
		applyPreferences(out, pol, &d)
		return d
	}
	d := release(pod, outcomeInspectionError, corev1.EventTypeWarning, placement.EventInspectionError,
		"Image inspection failed after every retry; removed the scheduling gate with the required node affinity unchanged. Registry error: "+err.Error())
	applyPreferences(d.Pod, pol, &d)
	return d
}

// labelArchitectures labels the pod single-arch or multi-arch ("") by how
// many architectures its images share, and with one label per
// architecture.
func labelArchitectures(pod *corev1.Pod, archs sets.Set[string]) {
	if archs.Len() == 1 {
		placement.SetLabel(pod, placement.SingleArchLabel, "")
	} else {
		placement.SetLabel(pod, placement.MultiArchLabel, "")
	}
	for a := range archs {
		placement.SetLabel(pod, placement.ArchLabelFor(a), "")
	}
}

// labelInspectionError records on the pod that its images could not be
// inspected: the label, how many times, and the last error (cut short).
func labelInspectionError(pod *corev1.Pod, err error, failures int) {
	placement.SetLabel(pod, placement.ImageInspectionErrorLabel, "")
	placement.SetLabel(pod, placement.ImageInspectionErrorCountLabel, strconv.Itoa(max(failures, 1)))
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	msg := err.Error()
	if len(msg) > placement.MaxInspectionErrorAnnotation {
		msg = msg[:placement.MaxInspectionErrorAnnotation]
	}
	pod.Annotations[placement.ImageInspectionErrorAnnotation] = msg
}

// inspectionError joins the errors of the images that failed, nil if none.
func inspectionError(results []imageResult) error {
	var errs []error
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.image, r.err))
		}
	}
	return errors.Join(errs...)
}

// permanentFailure reports whether an image failed with an answer a retry
// would only repeat: the pod cannot run as it is, so it waits no longer.
func permanentFailure(results []imageResult) bool {
	for _, r := range results {
		if r.err != nil && image.Permanent(r.err) {
			return true
		}
	}
	return false
}

// blockedImage reports whether an image is on a blocked registry.
func blockedImage(results []imageResult) bool {
	for _, r := range results {
		var blocked *image.BlockedError
		if errors.As(r.err, &blocked) {
			return true
		}
	}
	return false
}

// describeResults says which architectures each image has, for people.
func describeResults(results []imageResult) string {
	parts := make([]string, 0, len(results))
	for _, r := range results {
		parts = append(parts, r.image+" "+fmt.Sprint(sets.List(r.archs)))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func valueSet(set bool) string {
	if set {
		return placement.LabelValueSet
	}
	return placement.LabelValueNotSet
}

func truncate(s string) string {
	if len(s) <= maxEventMessage {
		return s
	}
	return s[:maxEventMessage-3] + "..."
}
