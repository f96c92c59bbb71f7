package protection

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
	"github.com/archway-build/archway/pkg/scheduling/protection"
)

// An unauthorized user's pod tolerating the control-plane taint is denied
// in mode Enable, with a message that names the group, the toleration and
// what to authorize; with the protection off (Disable) the same pod is
// admitted.
func TestTolerationDeniedInEnable(t *testing.T) {
	h := newHarness(t, "tolerate")
	alice := as(t, "alice")
	useConfig(t, schedulingv1alpha1.ModeEnable)
	before := decisions(t, schedulingv1alpha1.ModeEnable, protection.ResultDenied)
	h.expectDenied(alice, makePod(h.ns, "p").tolerateControlPlane().obj(),
		"protected node group ControlPlane (mode Enable)",
		`toleration {key "node-role.kubernetes.io/control-plane", operator Exists, effect NoSchedule}`,
		`the requesting user "alice" and the pod's namespace "`+h.ns+`"`,
		`adds "alice" and "`+h.ns+`/default" to spec.groups[name=ControlPlane].authorizedUsers`)
	if got := decisions(t, schedulingv1alpha1.ModeEnable, protection.ResultDenied); got != before+1 {
		t.Errorf("denied decisions went from %v to %v, want one more", before, got)
	}

	useConfig(t, schedulingv1alpha1.ModeDisable)
	h.create(alice, makePod(h.ns, "p").tolerateControlPlane().obj())
	if w := alice.takeWarnings(); len(w) != 0 {
		t.Errorf("warnings in mode Disable: %q", w)
	}
}

// In mode Inform the same pod is admitted with an admission warning and an
// event on the pod that say who, what and why; the scheduler's binding of
// it to the control-plane node is warned about too.
func TestTolerationWarnedInInform(t *testing.T) {
	h := newHarness(t, "inform")
	alice := as(t, "alice")
	useConfig(t, schedulingv1alpha1.ModeInform)
	// Pinned to the control-plane node, so the binding is a path too.
	h.create(alice, makePod(h.ns, "p").tolerateControlPlane().onControlPlane().obj())
	warnings := alice.takeWarnings()
	if len(warnings) != 1 || !strings.Contains(warnings[0], "protected node group ControlPlane (mode Inform)") ||
		!strings.Contains(warnings[0], `the requesting user "alice"`) {
		t.Fatalf("warnings %q, want one about ControlPlane naming alice", warnings)
	}
	note := h.waitEvent("p", protection.EventUnauthorizedPlacement)
	for _, want := range []string{"creating pod " + h.ns + "/p", "toleration", "authorizedUsers"} {
		if !strings.Contains(note, want) {
			t.Errorf("event note %q lacks %q", note, want)
		}
	}
	if node := h.waitBound("p"); node != controlPlaneNode {
		t.Fatalf("pod bound to %s, want %s", node, controlPlaneNode)
	}
	if got := decisions(t, schedulingv1alpha1.ModeInform, protection.ResultWarned); got < 2 {
		t.Errorf("warned decisions %v, want the create's and the binding's", got)
	}
}

// A pod of an authorized namespace, created by its authorized service
// account, lands on the control-plane node through the real scheduler in
// mode Enable; the same pod created by an unauthorized user in that
// namespace is denied (both halves must hold).
func TestAuthorizedPodLandsOnControlPlane(t *testing.T) {
	h := newHarness(t, "ops")
	useConfig(t, schedulingv1alpha1.ModeEnable, h.ns+"/default")
	h.expectDenied(as(t, "alice"), makePod(h.ns, "by-alice").tolerateControlPlane().onControlPlane().obj(),
		`not authorized: the requesting user "alice".`)
	ops := as(t, serviceAccountUser(h.ns, "default"))
	h.create(ops, makePod(h.ns, "p").tolerateControlPlane().onControlPlane().obj())
	if node := h.waitBound("p"); node != controlPlaneNode {
		t.Fatalf("pod bound to %s, want %s", node, controlPlaneNode)
	}
	if w := ops.takeWarnings(); len(w) != 0 {
		t.Errorf("warnings for an authorized pod: %q", w)
	}
}

// spec.nodeName naming the control-plane node, by an unauthorized user, is
// denied in mode Enable and admitted in mode Disable.
func TestNodeNameDenied(t *testing.T) {
	h := newHarness(t, "nodename")
	alice := as(t, "alice")
	useConfig(t, schedulingv1alpha1.ModeEnable)
	h.expectDenied(alice, makePod(h.ns, "p").nodeName(controlPlaneNode).obj(),
		`spec.nodeName "control-plane-1"`, "otherwise remove the spec.nodeName from the pod")
	// A worker's name is no path.
	h.create(alice, makePod(h.ns, "on-worker").nodeName("node-arm64-1").obj())

	useConfig(t, schedulingv1alpha1.ModeDisable)
	h.create(alice, makePod(h.ns, "p").nodeName(controlPlaneNode).obj())
}

// A binding to the control-plane node posted by an identity that is not
// authorized (a secondary scheduler) is denied; the same binding posted by
// the scheduler's identity is admitted.
func TestBindingByUnauthorizedIdentityDenied(t *testing.T) {
	h := newHarness(t, "binding")
	useConfig(t, schedulingv1alpha1.ModeEnable, h.ns+"/default")
	// A pod the real scheduler leaves alone, in an authorized namespace.
	pod := makePod(h.ns, "p").tolerateControlPlane().schedulerName("secondary-scheduler").obj()
	h.create(as(t, serviceAccountUser(h.ns, "default")), pod)
	rogue := as(t, serviceAccountUser(h.ns, "secondary-scheduler"))
	err := h.bind(rogue, pod, controlPlaneNode)
	if err == nil || !strings.Contains(err.Error(), `binding to node "control-plane-1"`) ||
		!strings.Contains(err.Error(), `the requesting user "system:serviceaccount:`+h.ns+`:secondary-scheduler"`) {
		t.Fatalf("binding by %s: %v, want a denial naming the binding and the user", rogue.user, err)
	}
	if err := h.bind(as(t, schedulerUser), pod, controlPlaneNode); err != nil {
		t.Fatalf("binding by %s: %v", schedulerUser, err)
	}
	if node := h.waitBound("p"); node != controlPlaneNode {
		t.Fatalf("pod bound to %s, want %s", node, controlPlaneNode)
	}
}

// Switching modes takes effect without restarting the webhook: Enable
// denies, Inform warns, Disable says nothing, Enable denies again.
func TestModeSwitchWithoutRestart(t *testing.T) {
	h := newHarness(t, "switch")
	alice := as(t, "alice")
	pod := func(name string) *corev1.Pod { return makePod(h.ns, name).nodeName(controlPlaneNode).obj() }

	useConfig(t, schedulingv1alpha1.ModeEnable)
	h.expectDenied(alice, pod("a"), "mode Enable")

	useConfig(t, schedulingv1alpha1.ModeInform)
	h.create(alice, pod("b"))
	if w := alice.takeWarnings(); len(w) != 1 || !strings.Contains(w[0], "mode Inform") {
		t.Errorf("warnings in mode Inform: %q", w)
	}

	useConfig(t, schedulingv1alpha1.ModeDisable)
	h.create(alice, pod("c"))
	if w := alice.takeWarnings(); len(w) != 0 {
		t.Errorf("warnings in mode Disable: %q", w)
	}

	useConfig(t, schedulingv1alpha1.ModeEnable)
	h.expectDenied(alice, pod("d"), "mode Enable")
}
