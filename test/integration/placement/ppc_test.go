package placement

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"

	"github.com/archway-build/archway/test/bed"
)

func scoringFor(pairs ...any) *multiarchv1beta1.Plugins {
	s := &multiarchv1beta1.NodeAffinityScoring{Enabled: true}
	for i := 0; i < len(pairs); i += 2 {
		s.Platforms = append(s.Platforms, multiarchv1beta1.NodeAffinityScoringPlatformTerm{Architecture: pairs[i].(string), Weight: int32(pairs[i+1].(int))})
	}
	return &multiarchv1beta1.Plugins{NodeAffinityScoring: s}
}

// TestPodPlacementConfig: namespace configs tune the preferred
// architectures of the pods they select, the highest priority first and
// before the cluster config; they need the cluster config, which cannot go
// while they exist.
func TestPodPlacementConfig(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{Plugins: scoringFor("s390x", 100)})
	h := newHarness(t, "ppc", nil)
	create := func(name string, priority int32, selector map[string]string, plugins *multiarchv1beta1.Plugins) error {
		c := &multiarchv1beta1.PodPlacementConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name},
			Spec:       multiarchv1beta1.PodPlacementConfigSpec{Priority: priority, Plugins: plugins},
		}
		if selector != nil {
			c.Spec.LabelSelector = &metav1.LabelSelector{MatchLabels: selector}
		}
		err := k8s.Create(h.ctx, c)
		if err == nil {
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), c) })
		}
		return err
	}
	if err := create("arm", 10, map[string]string{"app": "fast"}, scoringFor("arm64", 100, "s390x", 1)); err != nil {
		t.Fatal(err)
	}
	err := create("same-priority", 10, nil, scoringFor("amd64", 100))
	if err == nil || !strings.Contains(err.Error(), "already has priority 10") {
		t.Errorf("a second config with priority 10: %v", err)
	}

	// The cluster config prefers s390x; the namespace config, for app=fast,
	// arm64 (and s390x only a little).
	fast := makePod(h.ns, "fast").image(imgAll).obj()
	fast.Labels = map[string]string{"app": "fast"}
	h.create(fast)
	h.create(makePod(h.ns, "other").image(imgAll).obj())
	if arch := h.waitBound("fast"); arch != "arm64" {
		t.Errorf("fast: bound to %s, want arm64 (the namespace config)", arch)
	}
	if arch := h.waitBound("other"); arch != "s390x" {
		t.Errorf("other: bound to %s, want s390x (the cluster config)", arch)
	}
	prefs := h.waitReleased("fast").Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	if len(prefs) != 2 || prefs[0].Weight != 100 || prefs[1].Weight != 1 {
		t.Errorf("preferred terms %+v: want arm64 100 and s390x 1, the cluster's s390x 100 not overriding", prefs)
	}

	// A higher priority wins for the architectures it names.
	if err := create("ppc", 20, nil, scoringFor("arm64", 1, "ppc64le", 100)); err != nil {
		t.Fatal(err)
	}
	fast2 := makePod(h.ns, "fast2").image(imgAll).obj()
	fast2.Labels = map[string]string{"app": "fast"}
	h.create(fast2)
	if arch := h.waitBound("fast2"); arch != "ppc64le" {
		t.Errorf("fast2: bound to %s, want ppc64le (the higher priority config)", arch)
	}

	// The cluster config cannot go while namespace configs exist.
	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Name: multiarchv1beta1.ClusterPodPlacementConfigName}}
	err = k8s.Delete(h.ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "cannot be deleted while") {
		t.Fatalf("deleting the cluster config with namespace configs: %v", err)
	}
	for _, name := range []string{"arm", "ppc"} {
		if err := k8s.Delete(h.ctx, &multiarchv1beta1.PodPlacementConfig{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	// The webhook judges from its informer cache: a dry-run delete tells
	// when it has seen the namespace configs go.
	err = wait.PollUntilContextTimeout(h.ctx, bed.Interval, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
		err := k8s.Delete(ctx, cfg, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "cannot be deleted while") {
			return false, nil
		}
		return true, err
	})
	if err != nil {
		t.Fatalf("deleting the cluster config once the namespace configs are gone: %v", err)
	}
	if err := deleteConfig(h.ctx); err != nil {
		t.Fatal(err)
	}
	// Without a cluster config, no namespace config.
	if err := create("orphan", 1, nil, nil); err == nil || !strings.Contains(err.Error(), "needs the ClusterPodPlacementConfig") {
		t.Errorf("a namespace config without the cluster config: %v", err)
	}
}

// TestSeedPodPlacementConfigPrecedence is written from the functional tests
// of the namespace-scoped PodPlacementConfig's design:
//   - the configuration of the namespace-scoped config is applied to the
//     pods it selects, and the cluster config's preferred affinities are
//     ignored;
//   - the highest-priority config applies to a pod several configs select;
//   - a pod a config does not select is not processed with it.
//
// The cluster config's preferenceMerge PerArchitecture keeps the multiarch
// tuning operator controller's merge: the configs' preferences are joined
// architecture by architecture.
func TestSeedPodPlacementConfigPrecedence(t *testing.T) {
	spec := multiarchv1beta1.ClusterPodPlacementConfigSpec{Plugins: scoringFor("amd64", 60)}
	ensureConfig(t, spec)
	h := newHarness(t, "seed-ppc", nil)
	for _, c := range []*multiarchv1beta1.PodPlacementConfig{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "arm"},
			Spec: multiarchv1beta1.PodPlacementConfigSpec{
				Priority: 5, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "arm"}}, Plugins: scoringFor("arm64", 30),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "low"},
			Spec: multiarchv1beta1.PodPlacementConfigSpec{
				Priority: 10, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "both"}}, Plugins: scoringFor("ppc64le", 100),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "high"},
			Spec: multiarchv1beta1.PodPlacementConfigSpec{
				Priority: 20, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "both"}}, Plugins: scoringFor("s390x", 50),
			},
		},
	} {
		if err := k8s.Create(h.ctx, c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), c) })
	}
	labelled := func(name string, labels map[string]string) *corev1.Pod {
		p := makePod(h.ns, name).image(imgAll).obj()
		p.Labels = labels
		return h.create(p)
	}
	prefs := func(name string) []string {
		var out []string
		for _, p := range h.waitReleased(name).Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			out = append(out, fmt.Sprintf("%s:%d", p.Preference.MatchExpressions[0].Values[0], p.Weight))
		}
		return out
	}
	check := func(name, wantArch string, wantPrefs ...string) {
		t.Helper()
		if got := prefs(name); !slices.Equal(got, wantPrefs) {
			t.Errorf("%s: preferred terms %v, want %v", name, got, wantPrefs)
		}
		if arch := h.waitBound(name); arch != wantArch {
			t.Errorf("%s: bound to %s, want %s", name, arch, wantArch)
		}
	}

	labelled("arm", map[string]string{"app": "arm"})
	labelled("both", map[string]string{"tier": "both"})
	labelled("none", map[string]string{"app": "other"})
	// The namespace config alone: the cluster's amd64 60 is ignored.
	check("arm", "arm64", "arm64:30")
	// The highest priority alone: low's ppc64le 100 is not added.
	check("both", "s390x", "s390x:50")
	// Selected by no namespace config: the cluster config's.
	check("none", "amd64", "amd64:60")

	// PerArchitecture: the cluster's amd64 60 and low's ppc64le 100 join.
	spec.PreferenceMerge = multiarchv1beta1.PreferenceMergePerArchitecture
	ensureConfig(t, spec)
	labelled("arm-merged", map[string]string{"app": "arm"})
	labelled("both-merged", map[string]string{"tier": "both"})
	check("arm-merged", "amd64", "arm64:30", "amd64:60")
	check("both-merged", "ppc64le", "s390x:50", "ppc64le:100", "amd64:60")
}
