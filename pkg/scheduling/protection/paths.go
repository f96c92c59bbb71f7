package protection

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Node is what the decision needs of a node: its name and labels.
type Node struct {
	Name   string
	Labels map[string]string
}

// PathKind is how a request reaches a protected node.
type PathKind string

const (
	// PathNodeName: spec.nodeName names a protected node, bypassing the
	// scheduler.
	PathNodeName PathKind = "nodeName"
	// PathToleration: the pod tolerates a control-plane taint and its node
	// selection leaves protected nodes open to it.
	PathToleration PathKind = "toleration"
	// PathNodeSelection: the pod's nodeSelector and required node affinity
	// match protected nodes and no other node.
	PathNodeSelection PathKind = "nodeSelection"
	// PathBinding: a binding assigns the pod to a protected node.
	PathBinding PathKind = "binding"
)

// Path is one way a request puts a pod on protected nodes.
type Path struct {
	Kind PathKind
	// What names the part of the request, e.g. `spec.nodeName
	// "control-plane-1"`.
	What string
	// Nodes are the protected nodes the path reaches, sorted.
	Nodes []string
}

func (p Path) String() string {
	return fmt.Sprintf("%s (protected nodes: %s)", p.What, strings.Join(p.Nodes, ", "))
}

// ProtectedTaints are the taints control-plane nodes carry (kubeadm's and
// OpenShift's keys, the legacy "master" one included) with the effects
// that keep pods away. A pod tolerating any of them is a path to the
// ControlPlane group.
var ProtectedTaints = []corev1.Taint{
	{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
	{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoExecute},
	{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoSchedule},
	{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoExecute},
}

// tolerates says whether t tolerates taint, as the scheduler matches them:
// an empty key with operator Exists tolerates every taint, an empty effect
// every effect.
func tolerates(t corev1.Toleration, taint corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key == "" {
		return t.Operator == corev1.TolerationOpExists
	}
	if t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		return true
	case "", corev1.TolerationOpEqual:
		return t.Value == taint.Value
	}
	return false
}

// describeToleration renders a toleration as it reads in a pod spec.
func describeToleration(t corev1.Toleration) string {
	op := t.Operator
	if op == "" {
		op = corev1.TolerationOpEqual
	}
	parts := []string{fmt.Sprintf("key %q", t.Key), "operator " + string(op)}
	if op == corev1.TolerationOpEqual {
		parts = append(parts, fmt.Sprintf("value %q", t.Value))
	}
	effect := string(t.Effect)
	if effect == "" {
		effect = "(all)"
	}
	parts = append(parts, "effect "+effect)
	return "toleration {" + strings.Join(parts, ", ") + "}"
}

// hasRequiredSelection says whether the pod restricts its nodes by
// nodeSelector or required node affinity.
func hasRequiredSelection(pod *corev1.Pod) bool {
	return len(pod.Spec.NodeSelector) > 0 || requiredTerms(pod) != nil
}

func requiredTerms(pod *corev1.Pod) *corev1.NodeSelector {
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return nil
}

// selectionMatches says whether the node passes the pod's nodeSelector and
// required node affinity, with the scheduler's semantics: every
// nodeSelector label, and at least one term whose expressions (labels) and
// fields (metadata.name) all match; a term with neither matches nothing.
func selectionMatches(pod *corev1.Pod, node Node) bool {
	for k, v := range pod.Spec.NodeSelector {
		if got, ok := node.Labels[k]; !ok || got != v {
			return false
		}
	}
	terms := requiredTerms(pod)
	if terms == nil {
		return true
	}
	return slices.ContainsFunc(terms.NodeSelectorTerms, func(t corev1.NodeSelectorTerm) bool { return termMatches(t, node) })
}

func termMatches(t corev1.NodeSelectorTerm, node Node) bool {
	if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
		return false
	}
	for _, r := range t.MatchExpressions {
		v, ok := node.Labels[r.Key]
		if !requirementMatches(r, v, ok) {
			return false
		}
	}
	for _, r := range t.MatchFields {
		if r.Key != "metadata.name" || !requirementMatches(r, node.Name, true) {
			return false
		}
	}
	return true
}

func requirementMatches(r corev1.NodeSelectorRequirement, value string, present bool) bool {
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return present && slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpNotIn:
		return !present || !slices.Contains(r.Values, value)
	case corev1.NodeSelectorOpExists:
		return present
	case corev1.NodeSelectorOpDoesNotExist:
		return !present
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !present || len(r.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(value, 10, 64)
		want, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}

// podPaths lists the paths by which the pod as specified reaches the
// protected nodes, given every node known (protected or not).
func podPaths(pod *corev1.Pod, protected map[string]bool, nodes []Node) []Path {
	var paths []Path
	if name := pod.Spec.NodeName; name != "" {
		if protected[name] {
			paths = append(paths, Path{Kind: PathNodeName, What: fmt.Sprintf("spec.nodeName %q", name), Nodes: []string{name}})
		}
		// A pod with a node named needs no toleration or selection to
		// get there, and gets nowhere else.
		return paths
	}
	var open, other []string // protected / unprotected nodes the selection admits
	for _, n := range nodes {
		if !selectionMatches(pod, n) {
			continue
		}
		if protected[n.Name] {
			open = append(open, n.Name)
		} else {
			other = append(other, n.Name)
		}
	}
	slices.Sort(open)
	if len(open) == 0 {
		return nil
	}
	for _, t := range pod.Spec.Tolerations {
		if slices.ContainsFunc(ProtectedTaints, func(taint corev1.Taint) bool { return tolerates(t, taint) }) {
			paths = append(paths, Path{Kind: PathToleration, What: describeToleration(t), Nodes: open})
		}
	}
	if hasRequiredSelection(pod) && len(other) == 0 {
		paths = append(paths, Path{Kind: PathNodeSelection, What: "nodeSelector/required node affinity matching protected nodes only", Nodes: open})
	}
	return paths
}

// newPaths are the paths of after that before did not have: an update is
// judged only on what it adds, so that a pod admitted before (or
// authorized then) can still be labelled, finalized or patched.
func newPaths(before, after []Path) []Path {
	var out []Path
	for _, p := range after {
		if !slices.ContainsFunc(before, func(q Path) bool { return q.String() == p.String() }) {
			out = append(out, p)
		}
	}
	return out
}
