package placement

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
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
	err = wait.PollUntilContextTimeout(h.ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
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
