package protection

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
	"github.com/archway-build/archway/test/bed"
)

// The status says what is enforced and what was denied: after a denial in
// mode Enable, status.denials counts it and names its user, namespace and
// pod, Enforcing is True, and `kubectl get cpp` shows it. An emergency
// override to Disable with a short until lets the denied pod in and sets
// the pods webhook's failurePolicy to Ignore; once until passes the status
// says the override expired, failurePolicy is Fail again, and the same pod
// is denied again, with nothing but the clock changed.
func TestOverrideLapses(t *testing.T) {
	h := newHarness(t, "override")
	alice := as(t, "alice")
	useConfig(t, schedulingv1alpha1.ModeEnable)
	pod := func(name string) *corev1.Pod { return makePod(h.ns, name).nodeName(controlPlaneNode).obj() }

	h.expectDenied(alice, pod("before"), `spec.nodeName "`+controlPlaneNode+`"`)
	st := waitStatus(t, "the denial counted", func(s schedulingv1alpha1.ControlPlaneProtectionStatus) bool {
		return s.Denials != nil && s.Denials.Last != nil && s.Denials.Last.Pod == "before" && s.Denials.Last.Namespace == h.ns
	})
	if l := st.Denials.Last; l.User != "alice" || l.Operation != "create" || l.Group != schedulingv1alpha1.ControlPlane || st.Denials.Count < 1 {
		t.Errorf("last denial %+v of %d, want alice's create", l, st.Denials.Count)
	}
	if c := meta.FindStatusCondition(st.Conditions, schedulingv1alpha1.ConditionEnforcing); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Enforcing %+v, want True", c)
	}
	if len(st.Groups) != 1 || st.Groups[0].Mode != schedulingv1alpha1.ModeEnable || st.Groups[0].ProtectedNodes != 1 ||
		!slices.Contains(st.Groups[0].AuthorizedGroups, "system:masters") {
		t.Errorf("groups %+v", st.Groups)
	}
	out := kubectlGet(t)
	for _, want := range []string{"ENFORCING", "DENIED", "LAST DENIAL", "Enable", "True"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get cpp:\n%s\nlacks %q", out, want)
		}
	}

	// Whole seconds, as the API keeps it.
	until := time.Now().Add(5 * time.Second).Truncate(time.Second)
	setOverride(t, &schedulingv1alpha1.ProtectionOverride{Mode: schedulingv1alpha1.ModeDisable, Until: metav1.NewTime(until), Reason: "etcd restore"})
	h.create(alice, pod("during"))
	waitFailurePolicy(t, admissionregistrationv1.Ignore)
	st = waitStatus(t, "the override in effect", func(s schedulingv1alpha1.ControlPlaneProtectionStatus) bool {
		c := meta.FindStatusCondition(s.Conditions, schedulingv1alpha1.ConditionOverridden)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if c := meta.FindStatusCondition(st.Conditions, schedulingv1alpha1.ConditionEnforcing); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Overridden" {
		t.Errorf("Enforcing under the override %+v", c)
	}

	// The status controller looks again at until: the condition flips.
	st = waitStatus(t, "the override expired", func(s schedulingv1alpha1.ControlPlaneProtectionStatus) bool {
		c := meta.FindStatusCondition(s.Conditions, schedulingv1alpha1.ConditionOverridden)
		return c != nil && c.Reason == "Expired"
	})
	if time.Now().Before(until) {
		t.Fatalf("the status says the override expired before %s", until)
	}
	if st.Groups[0].Mode != schedulingv1alpha1.ModeEnable {
		t.Errorf("mode in effect after the override %s, want Enable", st.Groups[0].Mode)
	}
	h.expectDenied(alice, pod("after"), `spec.nodeName "`+controlPlaneNode+`"`)
	waitFailurePolicy(t, admissionregistrationv1.Fail)
}

// setOverride sets spec.override and waits until the webhook's cache has
// it.
func setOverride(t *testing.T, o *schedulingv1alpha1.ProtectionOverride) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bed.DefaultTimeout)
	defer cancel()
	key := types.NamespacedName{Name: schedulingv1alpha1.ControlPlaneProtectionName}
	cfg := &schedulingv1alpha1.ControlPlaneProtection{}
	if err := k8s.Get(ctx, key, cfg); err != nil {
		t.Fatal(err)
	}
	// Merge-patched: a status write in between does not conflict.
	orig := cfg.DeepCopy()
	cfg.Spec.Override = o
	if err := k8s.Patch(ctx, cfg, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		seen := &schedulingv1alpha1.ControlPlaneProtection{}
		err := webhookMgr.GetCache().Get(ctx, key, seen)
		return err == nil && seen.Generation >= cfg.Generation, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// waitStatus waits until the ControlPlaneProtection's status satisfies ok
// and returns it.
func waitStatus(t *testing.T, what string, ok func(schedulingv1alpha1.ControlPlaneProtectionStatus) bool) schedulingv1alpha1.ControlPlaneProtectionStatus {
	t.Helper()
	var cfg schedulingv1alpha1.ControlPlaneProtection
	err := wait.PollUntilContextTimeout(context.Background(), bed.Interval, bed.DefaultTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, types.NamespacedName{Name: schedulingv1alpha1.ControlPlaneProtectionName}, &cfg); err != nil {
			return false, nil
		}
		return ok(cfg.Status), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; status %+v", what, err, cfg.Status)
	}
	return cfg.Status
}

// kubectlGet is `kubectl get controlplaneprotection cluster`'s output.
func kubectlGet(t *testing.T) string {
	t.Helper()
	kubectl, err := bed.Tool("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "--kubeconfig="+testBed.Kubeconfig, "get", "cpp", "cluster").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get cpp: %v\n%s", err, out)
	}
	return string(out)
}
