package podcontroller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/archway-build/archway/pkg/placement"
)

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func term(exprs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: exprs}
}

func required(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

var (
	zoneA     = expr("topology.kubernetes.io/zone", corev1.NodeSelectorOpIn, "a")
	gpu       = expr("gpu", corev1.NodeSelectorOpExists)
	userArch  = expr(placement.ArchLabel, corev1.NodeSelectorOpIn, "amd64")
	userNotS  = expr(placement.ArchLabel, corev1.NodeSelectorOpNotIn, "s390x")
	armS390   = expr(placement.ArchLabel, corev1.NodeSelectorOpIn, "arm64", "s390x")
	noArch    = expr(placement.NoSupportedArchKey, corev1.NodeSelectorOpExists)
	hostField = corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-arm64-1"}}
)

func TestWithRequirement(t *testing.T) {
	preferredOnly := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 5, Preference: term(zoneA)}},
	}}
	preferredAndRequired := preferredOnly.DeepCopy()
	preferredAndRequired.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{term(armS390)},
	}
	podAffinityOnly := &corev1.Affinity{PodAffinity: &corev1.PodAffinity{}}
	podAffinityAndRequired := podAffinityOnly.DeepCopy()
	podAffinityAndRequired.NodeAffinity = required(term(armS390)).NodeAffinity

	tests := []struct {
		name        string
		affinity    *corev1.Affinity
		req         corev1.NodeSelectorRequirement
		want        *corev1.Affinity
		wantChanged bool
	}{
		{name: "no affinity: one new term", affinity: nil, req: armS390, want: required(term(armS390)), wantChanged: true},
		{name: "pod affinity only: kept, node affinity added", affinity: podAffinityOnly, req: armS390, want: podAffinityAndRequired, wantChanged: true},
		{name: "preferred only: kept, required added", affinity: preferredOnly, req: armS390, want: preferredAndRequired, wantChanged: true},
		{name: "empty required selector: one new term", affinity: required(), req: armS390, want: required(term(armS390)), wantChanged: true},
		{name: "one term: appended", affinity: required(term(zoneA)), req: armS390, want: required(term(zoneA, armS390)), wantChanged: true},
		{
			name:     "several terms: appended to each",
			affinity: required(term(zoneA), term(gpu), term(zoneA, gpu)), req: armS390,
			want:        required(term(zoneA, armS390), term(gpu, armS390), term(zoneA, gpu, armS390)),
			wantChanged: true,
		},
		{
			name:     "a term with arch is the user's: left alone",
			affinity: required(term(zoneA, userArch), term(gpu)), req: armS390,
			want:        required(term(zoneA, userArch), term(gpu, armS390)),
			wantChanged: true,
		},
		{
			name:     "NotIn on arch also counts as the user's say",
			affinity: required(term(userNotS), term(zoneA)), req: armS390,
			want:        required(term(userNotS), term(zoneA, armS390)),
			wantChanged: true,
		},
		{
			name:     "every term with arch: unchanged",
			affinity: required(term(userArch), term(zoneA, userNotS)), req: armS390,
			want:        required(term(userArch), term(zoneA, userNotS)),
			wantChanged: false,
		},
		{
			name:     "matchFields only: expression appended beside the fields",
			affinity: required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{hostField}}), req: armS390,
			want:        required(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{hostField}, MatchExpressions: []corev1.NodeSelectorRequirement{armS390}}),
			wantChanged: true,
		},
		{
			// It matches no node, and the apiserver refuses additions to
			// it on a gated pod.
			name:     "an empty term: left alone, the others appended to",
			affinity: required(corev1.NodeSelectorTerm{}, term(zoneA)), req: armS390,
			want:        required(corev1.NodeSelectorTerm{}, term(zoneA, armS390)),
			wantChanged: true,
		},
		{
			name:     "only an empty term: unchanged",
			affinity: required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{}}), req: armS390,
			want:        required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{}}),
			wantChanged: false,
		},
		{
			name:     "already applied: idempotent",
			affinity: required(term(zoneA, noArch)), req: noArch,
			want:        required(term(zoneA, noArch)),
			wantChanged: false,
		},
		{
			name:     "no supported arch: appended to terms without arch",
			affinity: required(term(zoneA), term(userArch)), req: noArch,
			want:        required(term(zoneA, noArch), term(userArch)),
			wantChanged: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.affinity.DeepCopy()
			got, changed := withRequirement(tt.affinity, tt.req)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("affinity (-want +got):\n%s", diff)
			}
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if diff := cmp.Diff(before, tt.affinity); diff != "" {
				t.Errorf("the input was modified (-before +after):\n%s", diff)
			}
		})
	}
}

func TestWithPreferences(t *testing.T) {
	pol := policy{Weights: []preference{
		{Architecture: "arm64", Weight: 50, Source: "PodPlacementConfig-tuning"},
		{Architecture: "amd64", Weight: 10, Source: sourceCluster},
		{Architecture: "s390x", Weight: 1, Source: sourceCluster},
	}, shadowed: []sourceEntry{{preference: preference{Architecture: "arm64", Weight: 5, Source: sourceCluster}, skipped: "a higher-priority config sets arm64"}}}
	pref := func(w int32, arch string) corev1.PreferredSchedulingTerm {
		return corev1.PreferredSchedulingTerm{Weight: w, Preference: term(expr(placement.ArchLabel, corev1.NodeSelectorOpIn, arch))}
	}
	withPrefs := func(a *corev1.Affinity, terms ...corev1.PreferredSchedulingTerm) *corev1.Affinity {
		out := a.DeepCopy()
		if out == nil {
			out = &corev1.Affinity{}
		}
		if out.NodeAffinity == nil {
			out.NodeAffinity = &corev1.NodeAffinity{}
		}
		out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(out.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, terms...)
		return out
	}
	userPref := corev1.PreferredSchedulingTerm{Weight: 20, Preference: term(expr(placement.ArchLabel, corev1.NodeSelectorOpIn, "amd64"))}
	zonePref := corev1.PreferredSchedulingTerm{Weight: 3, Preference: term(zoneA)}
	const shadowed = "arm64:5:ClusterPodPlacementConfig:skipped"
	all := withPrefs(nil, pref(50, "arm64"), pref(10, "amd64"), pref(1, "s390x"))
	allSources := "arm64:50:PodPlacementConfig-tuning,amd64:10:ClusterPodPlacementConfig,s390x:1:ClusterPodPlacementConfig," + shadowed
	tests := []struct {
		name        string
		affinity    *corev1.Affinity
		own         bool
		want        *corev1.Affinity
		wantAdded   bool
		wantSources string
	}{
		{
			// As the multiarch tuning operator: whatever the images'
			// architectures, which the required term already enforces.
			name: "every configured architecture, in config order", want: all, wantAdded: true, wantSources: allSources,
		},
		{
			name: "required kept", affinity: required(term(zoneA)),
			want: withPrefs(required(term(zoneA)), pref(50, "arm64"), pref(10, "amd64"), pref(1, "s390x")), wantAdded: true, wantSources: allSources,
		},
		{
			name: "unrelated preference kept", affinity: withPrefs(nil, zonePref),
			want: withPrefs(nil, zonePref, pref(50, "arm64"), pref(10, "amd64"), pref(1, "s390x")), wantAdded: true, wantSources: allSources,
		},
		{
			name: "the pod states its own arch preference: none added, all recorded as skipped", affinity: withPrefs(nil, userPref),
			own: true, want: withPrefs(nil, userPref),
			wantSources: "arm64:50:PodPlacementConfig-tuning:skipped,amd64:10:ClusterPodPlacementConfig:skipped,s390x:1:ClusterPodPlacementConfig:skipped," + shadowed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, added, entries := withPreferences(tt.affinity, pol, tt.own)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("affinity (-want +got):\n%s", diff)
			}
			if added != tt.wantAdded {
				t.Errorf("added = %v, want %v", added, tt.wantAdded)
			}
			if got := sourcesAnnotation(entries); got != tt.wantSources {
				t.Errorf("sources %q, want %q", got, tt.wantSources)
			}
		})
	}
}

func TestAllTermsConstrainArch(t *testing.T) {
	tests := []struct {
		affinity *corev1.Affinity
		want     bool
	}{
		{nil, false},
		{required(term(zoneA)), false},
		{required(term(userArch), term(zoneA)), false},
		{required(term(userArch), term(zoneA, userNotS)), true},
	}
	for i, tt := range tests {
		pod := &corev1.Pod{Spec: corev1.PodSpec{Affinity: tt.affinity}}
		if got := AllTermsConstrainArch(pod); got != tt.want {
			t.Errorf("case %d: got %v, want %v", i, got, tt.want)
		}
	}
}
