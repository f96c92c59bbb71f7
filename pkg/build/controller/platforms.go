package controller

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/platform"
)

// PlatformSource says where a build's target platforms came from.
type PlatformSource string

// The places target platforms come from, in the order they are consulted
// (overrides win over all).
const (
	SourceOverrides PlatformSource = "buildOverrides.platforms"
	SourceSpec      PlatformSource = "spec.platforms"
	SourceDefaults  PlatformSource = "buildDefaults.platforms"
	SourceNodes     PlatformSource = "nodes"
)

// ResolveInput is everything platform resolution looks at.
type ResolveInput struct {
	// Spec are the Build's spec.platforms (a BuildConfig copies its own
	// into the Builds it starts).
	Spec []string
	// AllowedToFail are the Build's spec.platformsAllowedToFail.
	AllowedToFail []string
	// Defaults and Overrides are the configured platforms.
	Defaults, Overrides []string
	// BuildNodeSelector is the Build's own spec.nodeSelector: the one a
	// user wrote, checked for conflicts with the platforms.
	BuildNodeSelector map[string]string
	// NodeSelector and Tolerations are the build pods' node selector
	// (before any platform's os/arch is added) and tolerations, with
	// defaults and overrides applied.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// ArchNodeSelector is the configured archNodeSelector: with false, pods
	// are not pinned to their platform's nodes and neither conflicts nor
	// missing nodes are checked.
	ArchNodeSelector bool
	// Nodes are the cluster's nodes.
	Nodes []corev1.Node
	// Emulation are the platforms build.emulation allows to be built
	// under emulation, and EmulationRequest the Build's
	// build.openshift.io/emulation annotation ("" when it has none).
	Emulation        []configv1alpha1.EmulatedPlatform
	EmulationRequest string
}

// Resolution is what a Build's target platforms resolved to.
type Resolution struct {
	// Platforms are the target platforms as their source spells them, in
	// its order (sorted for SourceNodes). Empty means a classic
	// single-pod build, exactly as OpenShift runs one.
	Platforms []string
	// Source is where Platforms came from.
	Source PlatformSource
	// NoNode holds, for each platform no Ready schedulable node can run,
	// the message of its NodePlatformNotFound failure.
	NoNode map[string]string
	// Emulated holds, for each platform no node of its own architecture
	// can build but one of another can under emulation (build.emulation),
	// that node's architecture.
	Emulated map[string]string
	// Failure, when set, fails the whole Build before any pod exists.
	Failure *Failure
}

// Failure is a phase with the reason and message that explain it.
type Failure struct {
	Phase   buildv1.BuildPhase
	Reason  buildv1.StatusReason
	Message string
}

// Classic reports whether the build runs as one pod with no platforms.
func (r Resolution) Classic() bool { return len(r.Platforms) == 0 }

// Resolve decides a Build's target platforms: buildOverrides.platforms when
// configured, else spec.platforms, else buildDefaults.platforms, else the
// platforms of the cluster's Ready, schedulable linux nodes that the build's
// pods could run on (their node selector matches and they tolerate every
// NoSchedule/NoExecute taint). When the nodes give a single platform, or
// none, the build is a classic single-pod build: that is what OpenShift
// does on a cluster of one architecture.
//
// Unless archNodeSelector is off, it then fails fast, before any pod:
// a build whose own nodeSelector names a kubernetes.io/os or
// kubernetes.io/arch another platform needs fails with
// NodeSelectorPlatformConflict, and a platform that no node can run gets
// NodePlatformNotFound, which fails the whole build (phase Error) unless
// the platform is allowed to fail. A platform no node of its own
// architecture can build is built under emulation instead when
// build.emulation lists it, the Build's emulation annotation does not rule
// it out, and a node of one of its host architectures is labelled as
// emulating it (Emulated).
func Resolve(in ResolveInput) Resolution {
	var res Resolution
	switch {
	case len(in.Overrides) > 0:
		res.Platforms, res.Source = slices.Clone(in.Overrides), SourceOverrides
	case len(in.Spec) > 0:
		res.Platforms, res.Source = slices.Clone(in.Spec), SourceSpec
	case len(in.Defaults) > 0:
		res.Platforms, res.Source = slices.Clone(in.Defaults), SourceDefaults
	default:
		res.Source = SourceNodes
		res.Platforms = nodePlatforms(in.Nodes, in.NodeSelector, in.Tolerations)
		if len(res.Platforms) < 2 {
			res.Platforms = nil
		}
		return res
	}
	parsed, err := platform.ParseList(res.Platforms)
	if err != nil {
		res.Failure = &Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonInvalidPlatform,
			Message: fmt.Sprintf("%s: %v", res.Source, err)}
		return res
	}
	if !in.ArchNodeSelector {
		return res
	}
	if msg := selectorConflict(in.BuildNodeSelector, res.Platforms, parsed); msg != "" {
		res.Failure = &Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonNodeSelectorPlatformConflict, Message: msg}
		return res
	}
	emu, err := emulationFor(in.Emulation, in.EmulationRequest)
	if err != nil {
		res.Failure = &Failure{Phase: buildv1.BuildPhaseFailed, Reason: buildv1.StatusReasonInvalidPlatform, Message: err.Error()}
		return res
	}
	allowed := map[string]bool{}
	for _, a := range in.AllowedToFail {
		if p, err := platform.Parse(a); err == nil {
			allowed[p.Key()] = true
		}
	}
	var required, notes []string
	for i, p := range parsed {
		if hasNodeFor(in.Nodes, p, in.NodeSelector, in.Tolerations) {
			continue
		}
		name := res.Platforms[i]
		note := emu.refused[p.Key()]
		if ep, ok := emu.allowed[p.Key()]; ok {
			if host := emulationHost(in.Nodes, p, ep, in.NodeSelector, in.Tolerations); host != "" {
				if res.Emulated == nil {
					res.Emulated = map[string]string{}
				}
				res.Emulated[name] = host
				continue
			}
			note = noHostMessage(p, ep)
		}
		if res.NoNode == nil {
			res.NoNode = map[string]string{}
		}
		res.NoNode[name] = noNodeMessage(name, in.NodeSelector)
		if note != "" {
			res.NoNode[name] += " (" + note + ")"
		}
		if !allowed[p.Key()] {
			required = append(required, name)
			if note != "" {
				notes = append(notes, name+": "+note)
			}
		}
	}
	if len(required) > 0 {
		noun := "platform " + required[0]
		if len(required) > 1 {
			noun = "platforms " + strings.Join(required, ", ")
		}
		msg := fmt.Sprintf("no Ready schedulable node can build %s%s; add such a node, remove the platform or allow it to fail",
			noun, selectorSuffix(in.NodeSelector))
		if len(notes) > 0 {
			msg += " (" + strings.Join(notes, "; ") + ")"
		}
		res.Failure = &Failure{Phase: buildv1.BuildPhaseError, Reason: buildv1.StatusReasonNodePlatformNotFound, Message: msg}
	}
	return res
}

// selectorConflict says which platforms the build's own node selector rules
// out, or "" when it rules out none.
func selectorConflict(sel map[string]string, names []string, parsed []platform.Platform) string {
	var bad []string
	for i, p := range parsed {
		for key, want := range p.NodeSelector() {
			if v, ok := sel[key]; ok && v != want {
				bad = append(bad, fmt.Sprintf("%s needs %s=%s", names[i], key, want))
			}
		}
	}
	if len(bad) == 0 {
		return ""
	}
	sort.Strings(bad)
	return fmt.Sprintf("spec.nodeSelector %s contradicts the target platforms: %s; remove the key from spec.nodeSelector or the platforms from spec.platforms",
		formatSelector(pick(sel, corev1.LabelOSStable, corev1.LabelArchStable)), strings.Join(bad, "; "))
}

func noNodeMessage(p string, sel map[string]string) string {
	return fmt.Sprintf("no Ready schedulable node can build %s%s", p, selectorSuffix(sel))
}

func selectorSuffix(sel map[string]string) string {
	rest := withoutPlatformKeys(sel)
	if len(rest) == 0 {
		return ""
	}
	return " with node selector " + formatSelector(rest)
}

// nodePlatforms returns the distinct linux platforms (os/arch) of the nodes
// the build's pods could run on, sorted.
func nodePlatforms(nodes []corev1.Node, sel map[string]string, tols []corev1.Toleration) []string {
	seen := map[string]bool{}
	var out []string
	for i := range nodes {
		n := &nodes[i]
		p, ok := platform.FromNodeLabels(n.Labels)
		if !ok || p.OS != "linux" || !nodeUsable(n, sel, tols) {
			continue
		}
		if s := p.String(); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// hasNodeFor reports whether a Ready schedulable node of p's os and
// architecture matches the selector (with p's os/arch in place of the
// selector's) and tolerates nothing the pod does not.
func hasNodeFor(nodes []corev1.Node, p platform.Platform, sel map[string]string, tols []corev1.Toleration) bool {
	want := withoutPlatformKeys(sel)
	for k, v := range p.NodeSelector() {
		want[k] = v
	}
	for i := range nodes {
		if nodeUsable(&nodes[i], want, tols) {
			return true
		}
	}
	return false
}

// nodeUsable reports whether a pod with the node selector and tolerations
// could be scheduled on the node now.
func nodeUsable(n *corev1.Node, sel map[string]string, tols []corev1.Toleration) bool {
	if n.Spec.Unschedulable || !nodeReady(n) {
		return false
	}
	for k, v := range sel {
		if got, ok := n.Labels[k]; !ok || got != v {
			return false
		}
	}
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !tolerated(t, tols) {
			return false
		}
	}
	return true
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// tolerated is the scheduler's TaintToleration rule for one taint.
func tolerated(t *corev1.Taint, tols []corev1.Toleration) bool {
	for _, tol := range tols {
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		if tol.Key == "" && tol.Operator == corev1.TolerationOpExists {
			return true
		}
		if tol.Key != t.Key {
			continue
		}
		switch tol.Operator {
		case corev1.TolerationOpExists:
			return true
		case "", corev1.TolerationOpEqual:
			if tol.Value == t.Value {
				return true
			}
		}
	}
	return false
}

func withoutPlatformKeys(sel map[string]string) map[string]string {
	out := make(map[string]string, len(sel))
	for k, v := range sel {
		if k != corev1.LabelOSStable && k != corev1.LabelArchStable {
			out[k] = v
		}
	}
	return out
}

func pick(m map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

func formatSelector(sel map[string]string) string {
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + sel[k]
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
