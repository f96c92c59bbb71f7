package podcontroller

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/image"
)

func gatedPod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "app"}}}}
	placement.Gate(pod)
	pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: "example.com/other"})
	for _, m := range mutate {
		m(pod)
	}
	return pod
}

func ok(image string, archs ...string) imageResult {
	return imageResult{image: image, archs: sets.New(archs...)}
}

func TestDecide(t *testing.T) {
	scoring := policy{Weights: []preference{
		{Architecture: "arm64", Weight: 40}, {Architecture: "amd64", Weight: 20},
	}}
	fallback := policy{fallback: "amd64"}
	registryDown := errors.New("pinging container registry: connection refused")

	tests := []struct {
		name       string
		pod        *corev1.Pod
		pol        policy
		results    []imageResult
		outcome    string
		reason     string
		message    string // a substring
		affinity   *corev1.Affinity
		wantLabels map[string]string
	}{
		{
			name: "intersection of two images", pod: gatedPod(),
			results: []imageResult{ok("a", "amd64", "arm64", "s390x"), ok("b", "arm64", "s390x", "ppc64le")},
			outcome: outcomePlaced, reason: placement.EventPredicateSet, message: "[arm64 s390x]",
			affinity:   required(term(armS390)),
			wantLabels: map[string]string{placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "set", placement.MultiArchLabel: "", placement.ArchLabelFor("arm64"): "", placement.ArchLabelFor("s390x"): ""},
		},
		{
			name: "single arch", pod: gatedPod(), results: []imageResult{ok("a", "amd64")},
			outcome: outcomePlaced, reason: placement.EventPredicateSet,
			affinity:   required(term(expr(placement.ArchLabel, corev1.NodeSelectorOpIn, "amd64"))),
			wantLabels: map[string]string{placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "set", placement.SingleArchLabel: "", placement.ArchLabelFor("amd64"): ""},
		},
		{
			name: "no common architecture", pod: gatedPod(func(p *corev1.Pod) { p.Spec.Affinity = required(term(zoneA)) }),
			results: []imageResult{ok("init", "amd64"), ok("app", "arm64", "s390x")},
			outcome: outcomeNoSupportedArch, reason: placement.EventNoSupportedArchitectures, message: "app [arm64 s390x], init [amd64]",
			affinity:   required(term(zoneA, noArch)),
			wantLabels: map[string]string{placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "set", placement.NoSupportedArchLabel: ""},
		},
		{
			name: "scoring adds every configured preference, as the multiarch tuning operator", pod: gatedPod(), pol: scoring,
			results: []imageResult{ok("a", "amd64", "s390x")},
			outcome: outcomePlaced, reason: placement.EventPredicateSet, message: "preferred",
			affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					term(expr(placement.ArchLabel, corev1.NodeSelectorOpIn, "amd64", "s390x")),
				}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
					{Weight: 40, Preference: term(expr(placement.ArchLabel, corev1.NodeSelectorOpIn, "arm64"))},
					{Weight: 20, Preference: term(expr(placement.ArchLabel, corev1.NodeSelectorOpIn, "amd64"))},
				},
			}},
			wantLabels: map[string]string{placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "set", placement.PreferredNodeAffinityLabel: "set", placement.MultiArchLabel: "", placement.ArchLabelFor("amd64"): "", placement.ArchLabelFor("s390x"): ""},
		},
		{
			name: "no weights, no preferences", pod: gatedPod(),
			results: []imageResult{ok("a", "amd64", "s390x")},
			outcome: outcomePlaced, reason: placement.EventPredicateSet,
			affinity:   required(term(expr(placement.ArchLabel, corev1.NodeSelectorOpIn, "amd64", "s390x"))),
			wantLabels: map[string]string{placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "set", placement.MultiArchLabel: "", placement.ArchLabelFor("amd64"): "", placement.ArchLabelFor("s390x"): ""},
		},
		{
			name: "every term already constrains arch", pod: gatedPod(func(p *corev1.Pod) { p.Spec.Affinity = required(term(userArch)) }),
			results: []imageResult{ok("a", "amd64", "arm64")},
			outcome: outcomeConflict, reason: placement.EventPredicatesConflict,
			affinity:   required(term(userArch)),
			wantLabels: map[string]string{placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "not-set", placement.MultiArchLabel: "", placement.ArchLabelFor("amd64"): "", placement.ArchLabelFor("arm64"): ""},
		},
		{
			name: "inspection failed, fallback configured", pod: gatedPod(), pol: fallback,
			results: []imageResult{ok("a", "arm64"), {image: "b", err: registryDown}},
			outcome: outcomeFallback, reason: placement.EventFallbackPredicateSet, message: "b: pinging container registry: connection refused",
			affinity: required(term(expr(placement.ArchLabel, corev1.NodeSelectorOpIn, "amd64"))),
			wantLabels: map[string]string{
				placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "set", placement.FallbackArchLabel: "amd64", placement.ImageInspectionErrorLabel: "", placement.ImageInspectionErrorCountLabel: "1",
				placement.SingleArchLabel: "", placement.ArchLabelFor("amd64"): "",
			},
		},
		{
			name: "inspection failed, fallback configured, the pod already pins its architecture", pol: policy{fallback: "amd64", Weights: []preference{{Architecture: "arm64", Weight: 10}}},
			pod:     gatedPod(func(p *corev1.Pod) { p.Spec.Affinity = required(term(userNotS)) }),
			results: []imageResult{{image: "b", err: registryDown}},
			outcome: outcomeFallback, reason: placement.EventFallbackPredicateSet,
			affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(userNotS)}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
					{Weight: 10, Preference: term(expr(placement.ArchLabel, corev1.NodeSelectorOpIn, "arm64"))},
				},
			}},
			wantLabels: map[string]string{
				placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "not-set", placement.PreferredNodeAffinityLabel: "set", placement.FallbackArchLabel: "amd64",
				placement.ImageInspectionErrorLabel: "", placement.ImageInspectionErrorCountLabel: "1",
			},
		},
		{
			name: "inspection failed, no fallback", pod: gatedPod(func(p *corev1.Pod) { p.Spec.Affinity = required(term(zoneA)) }),
			results: []imageResult{{image: "b", err: registryDown}},
			outcome: outcomeInspectionError, reason: placement.EventInspectionError, message: "Registry error: b: pinging",
			affinity:   required(term(zoneA)),
			wantLabels: map[string]string{placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "not-set", placement.ImageInspectionErrorLabel: "", placement.ImageInspectionErrorCountLabel: "1"},
		},
		{
			name: "a blocked registry: released without the fallback", pod: gatedPod(), pol: fallback,
			results: []imageResult{ok("a", "arm64"), {image: "b", err: &image.BlockedError{Image: "evil.example.com/b:1", Registry: "evil.example.com"}}},
			outcome: outcomeInspectionError, reason: placement.EventInspectionError, message: "registry evil.example.com is blocked",
			wantLabels: map[string]string{placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "not-set", placement.ImageInspectionErrorLabel: "", placement.ImageInspectionErrorCountLabel: "1"},
		},
		{
			name: "one architecture the config does not prefer: its preferences all the same, preferred-node-affinity set", pod: gatedPod(), pol: scoring,
			results: []imageResult{ok("a", "s390x")},
			outcome: outcomePlaced, reason: placement.EventPredicateSet,
			affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					term(expr(placement.ArchLabel, corev1.NodeSelectorOpIn, "s390x")),
				}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
					{Weight: 40, Preference: term(expr(placement.ArchLabel, corev1.NodeSelectorOpIn, "arm64"))},
					{Weight: 20, Preference: term(expr(placement.ArchLabel, corev1.NodeSelectorOpIn, "amd64"))},
				},
			}},
			wantLabels: map[string]string{placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "set", placement.PreferredNodeAffinityLabel: "set", placement.SingleArchLabel: "", placement.ArchLabelFor("s390x"): ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.pod.DeepCopy()
			d := decide(tt.pod, tt.pol, tt.results, 1)
			if d.Outcome != tt.outcome || d.Reason != tt.reason {
				t.Errorf("outcome %q reason %q, want %q %q", d.Outcome, d.Reason, tt.outcome, tt.reason)
			}
			if !strings.Contains(d.Message, tt.message) {
				t.Errorf("message %q does not contain %q", d.Message, tt.message)
			}
			if diff := cmp.Diff(tt.affinity, d.Pod.Spec.Affinity); diff != "" {
				t.Errorf("affinity (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantLabels, d.Pod.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if placement.HasGate(d.Pod) {
				t.Error("the gate is still there")
			}
			if len(d.Pod.Spec.SchedulingGates) != 1 || d.Pod.Spec.SchedulingGates[0].Name != "example.com/other" {
				t.Errorf("other gates must stay: %v", d.Pod.Spec.SchedulingGates)
			}
			if diff := cmp.Diff(before, tt.pod); diff != "" {
				t.Errorf("the input pod was modified:\n%s", diff)
			}
		})
	}
}

func TestPreflight(t *testing.T) {
	pinned := gatedPod(func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{placement.ArchLabel: "arm64"} })
	if d, done := preflight(pinned, policy{}); !done || d.Reason != placement.EventGatedPodIgnored || placement.HasGate(d.Pod) {
		t.Errorf("a pod pinning arch: done=%v reason=%q", done, d.Reason)
	}
	// Scored as the multiarch tuning operator scores it, with no
	// inspection and no required term.
	pol := policy{Weights: []preference{{Architecture: "amd64", Weight: 7, Source: sourceCluster}}}
	d, done := preflight(pinned, pol)
	if !done || d.Reason != placement.EventPredicatesConflict || placement.HasGate(d.Pod) {
		t.Errorf("a pod pinning arch, scoring on: done=%v reason=%q", done, d.Reason)
	}
	if want := map[string]string{placement.SchedulingGateLabel: "removed", placement.NodeAffinityLabel: "not-set", placement.PreferredNodeAffinityLabel: "set"}; !cmp.Equal(d.Pod.Labels, want) {
		t.Errorf("a pod pinning arch, scoring on: labels %v, want %v", d.Pod.Labels, want)
	}
	if a := d.Pod.Spec.Affinity; a == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil || len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("a pod pinning arch, scoring on: affinity %+v, want the one preferred term", a)
	}
	allArch := gatedPod(func(p *corev1.Pod) { p.Spec.Affinity = required(term(userArch), term(userNotS)) })
	if d, done := preflight(allArch, policy{}); !done || d.Reason != placement.EventPredicatesConflict || d.Pod.Labels[placement.NodeAffinityLabel] != "not-set" {
		t.Errorf("all terms with arch: done=%v reason=%q", done, d.Reason)
	}
	withScoring := policy{Weights: []preference{{Architecture: "arm64", Weight: 1}}}
	if _, done := preflight(allArch, withScoring); done {
		t.Error("with scoring on, the images must be inspected for preferences")
	}
	if _, done := preflight(gatedPod(), policy{}); done {
		t.Error("a plain pod must be inspected")
	}
}

func TestPodImages(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Image: "init:1"}, {Image: "app:1", ImagePullPolicy: corev1.PullAlways}},
		Containers:     []corev1.Container{{Image: "app:1", ImagePullPolicy: corev1.PullIfNotPresent}, {Image: "side:1"}, {Image: "init:1"}},
	}}
	images, always := podImages(pod)
	if diff := cmp.Diff([]string{"init:1", "app:1", "side:1"}, images); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"init:1": false, "app:1": true, "side:1": false}, always); diff != "" {
		t.Errorf("pull always (-want +got):\n%s", diff)
	}
	if podOS(pod) != "linux" {
		t.Error("default OS must be linux")
	}
	pod.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
	if podOS(pod) != "windows" {
		t.Error("spec.os.name must be the OS")
	}
}

func TestInspectionErrorLabels(t *testing.T) {
	long := errors.New(strings.Repeat("x", 400))
	d := decide(gatedPod(), policy{}, []imageResult{{image: "b", err: long}}, 3)
	if got := d.Pod.Labels[placement.ImageInspectionErrorCountLabel]; got != "3" {
		t.Errorf("count label %q, want 3", got)
	}
	got := d.Pod.Annotations[placement.ImageInspectionErrorAnnotation]
	if len(got) != placement.MaxInspectionErrorAnnotation || !strings.HasPrefix(got, "b: xxx") {
		t.Errorf("annotation %q (%d characters), want the error cut to %d", got, len(got), placement.MaxInspectionErrorAnnotation)
	}
	if _, ok := d.Pod.Labels[placement.ImageInspectionErrorLabel]; !ok {
		t.Error("no image-inspect-error label")
	}
}
