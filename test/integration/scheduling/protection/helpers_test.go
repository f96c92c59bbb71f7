package protection

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
	"github.com/archway-build/archway/pkg/scheduling/protection"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

// actor is a client acting as one user, by impersonation, that keeps the
// admission warnings it receives.
type actor struct {
	client.Client
	user     string
	mu       sync.Mutex
	warnings []string
}

// testUsersGroup is bound (TestMain) to every verb on the core, apps and
// batch resources, so RBAC never gets in the way of the suite's users
// creating, binding and updating pods, and to nothing of
// scheduling.archway.dev: RBAC grants them no use of a protected node
// group, as cluster-admin would. It is no group the shipped list
// authorizes.
const testUsersGroup = "protection-test:users"

// as makes a client for user, in testUsersGroup and any further groups.
func as(t testing.TB, user string, groups ...string) *actor {
	t.Helper()
	a := &actor{user: user}
	cfg := rest.CopyConfig(testBed.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string{testUsersGroup, "system:authenticated"}, groups...)}
	cfg.WarningHandler = a
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	a.Client = c
	return a
}

// HandleWarningHeader keeps a warning (rest.WarningHandler).
func (a *actor) HandleWarningHeader(_ int, _ string, text string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.warnings = append(a.warnings, text)
}

// takeWarnings returns the warnings received so far and forgets them.
func (a *actor) takeWarnings() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.warnings
	a.warnings = nil
	return w
}

func serviceAccountUser(ns, name string) string { return "system:serviceaccount:" + ns + ":" + name }

// podWrapper builds test pods: makePod(ns, "p").tolerateControlPlane().obj().
type podWrapper struct{ pod *corev1.Pod }

func makePod(ns, name string) *podWrapper {
	return &podWrapper{pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []corev1.Container{{Name: "c", Image: "busybox"}},
		},
	}}
}

func (w *podWrapper) tolerateControlPlane() *podWrapper {
	w.pod.Spec.Tolerations = append(w.pod.Spec.Tolerations, corev1.Toleration{
		Key: bed.ControlPlaneLabel, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
	})
	return w
}

func (w *podWrapper) onControlPlane() *podWrapper {
	if w.pod.Spec.NodeSelector == nil {
		w.pod.Spec.NodeSelector = map[string]string{}
	}
	w.pod.Spec.NodeSelector[bed.ControlPlaneLabel] = ""
	return w
}

func (w *podWrapper) nodeName(n string) *podWrapper      { w.pod.Spec.NodeName = n; return w }
func (w *podWrapper) schedulerName(n string) *podWrapper { w.pod.Spec.SchedulerName = n; return w }
func (w *podWrapper) obj() *corev1.Pod                   { return w.pod.DeepCopy() }

// harness is one case: a namespace and helpers failing the case.
type harness struct {
	t   *testing.T
	ctx context.Context
	ns  string
}

func newHarness(t *testing.T, prefix string) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bed.CaseTimeout)
	t.Cleanup(cancel)
	ns, err := testBed.CreateNamespace(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: ctx, ns: ns}
	t.Cleanup(func() {
		_ = k8s.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))
	})
	return h
}

// expectDenied creates pod as a and expects the webhook to deny it with a
// message holding every one of want.
func (h *harness) expectDenied(a *actor, pod *corev1.Pod, want ...string) {
	h.t.Helper()
	err := a.Create(h.ctx, pod)
	if err == nil {
		h.t.Fatalf("pod %s/%s created by %s was admitted, want denied", pod.Namespace, pod.Name, a.user)
	}
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "denied the request") {
		h.t.Fatalf("pod %s created by %s: %v, want a denial by the webhook", pod.Name, a.user, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			h.t.Errorf("denial %q\nlacks %q", err.Error(), w)
		}
	}
}

func (h *harness) create(a *actor, pod *corev1.Pod) {
	h.t.Helper()
	if err := a.Create(h.ctx, pod); err != nil {
		h.t.Fatalf("pod %s created by %s: %v", pod.Name, a.user, err)
	}
}

func (h *harness) waitBound(name string) string {
	h.t.Helper()
	node, err := testBed.WaitPodBound(h.ctx, h.ns, name)
	if err != nil {
		h.t.Fatal(err)
	}
	return node
}

// bind posts a binding of the pod to node as a.
func (h *harness) bind(a *actor, pod *corev1.Pod, node string) error {
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	return a.SubResource("binding").Create(h.ctx, pod, b)
}

// waitEvent waits for an event with reason about the pod and returns its
// note.
func (h *harness) waitEvent(pod, reason string) string {
	h.t.Helper()
	note, err := framework.WaitEvent(h.ctx, k8s, h.ns, pod, reason)
	if err != nil {
		h.t.Fatalf("no %s event for pod %s: %v", reason, pod, err)
	}
	return note
}

// setConfig makes the ControlPlaneProtection's ControlPlane group have mode
// and authorizedUsers (and no authorizedGroups), and waits until the
// webhook's cache has it.
func setConfig(ctx context.Context, mode schedulingv1alpha1.GroupMode, authorized []string) error {
	return setGroup(ctx, schedulingv1alpha1.ProtectionGroup{Name: schedulingv1alpha1.ControlPlane, Mode: mode, AuthorizedUsers: authorized})
}

// setGroup makes the ControlPlaneProtection's only group g, with no
// override, and waits until the webhook's cache has it.
func setGroup(ctx context.Context, g schedulingv1alpha1.ProtectionGroup) error {
	ctx, cancel := context.WithTimeout(ctx, bed.LongTimeout)
	defer cancel()
	key := types.NamespacedName{Name: schedulingv1alpha1.ControlPlaneProtectionName}
	spec := schedulingv1alpha1.ControlPlaneProtectionSpec{Groups: []schedulingv1alpha1.ProtectionGroup{g}}
	cfg := &schedulingv1alpha1.ControlPlaneProtection{}
	// The webhook's status controller writes the object's status on its
	// own events (denials, node labels, a replica's start and stop): the
	// spec is merge-patched, never updated at a resource version, so that
	// no status write in between makes it conflict.
	switch err := k8s.Get(ctx, key, cfg); {
	case apierrors.IsNotFound(err):
		cfg = &schedulingv1alpha1.ControlPlaneProtection{ObjectMeta: metav1.ObjectMeta{Name: key.Name}, Spec: spec}
		if err := k8s.Create(ctx, cfg); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		orig := cfg.DeepCopy()
		cfg.Spec = spec
		if err := k8s.Patch(ctx, cfg, client.MergeFrom(orig)); err != nil {
			return err
		}
	}
	generation := cfg.Generation
	return wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		seen := &schedulingv1alpha1.ControlPlaneProtection{}
		err := webhookMgr.GetCache().Get(ctx, key, seen)
		return err == nil && seen.Generation >= generation, nil
	})
}

// useConfig sets the config for a case: the shipped authorized users and
// groups, plus extra authorized users.
func useConfig(t testing.TB, mode schedulingv1alpha1.GroupMode, extra ...string) {
	t.Helper()
	shipped, err := shippedConfig()
	if err != nil {
		t.Fatal(err)
	}
	g := shipped.Spec.Groups[0]
	g.Mode = mode
	g.AuthorizedUsers = slices.Concat(g.AuthorizedUsers, extra)
	if err := setGroup(context.Background(), g); err != nil {
		t.Fatal(err)
	}
}

// decisions reads the webhook's decision counter for a mode and result.
func decisions(t testing.TB, mode schedulingv1alpha1.GroupMode, result protection.Result) float64 {
	t.Helper()
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "archway_control_plane_protection_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["group"] == string(schedulingv1alpha1.ControlPlane) && labels["mode"] == string(mode) && labels["result"] == string(result) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
