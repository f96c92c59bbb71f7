package placement

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
)

// ensureNamespace creates a namespace unless it exists.
func ensureNamespace(ctx context.Context, name string) error {
	err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// withGate makes the pod carry the scheduling gate from its creation, as
// a template that kept it, a restored backup or another placement
// controller would, with none of the webhook's labels.
func (w *podWrapper) withGate() *podWrapper {
	w.pod.Spec.SchedulingGates = append(w.pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: placement.SchedulingGate})
	return w
}

// waitWebhookGates waits until a dry-run create of a plain pod in ns comes
// back gated (want) or not: the webhook has seen the heartbeat change.
func waitWebhookGates(ctx context.Context, t *testing.T, ns string, want bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, bed.Interval, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
		p := makePod(ns, "probe").image(imgAMD64Only).obj()
		if err := k8s.Create(ctx, p, dryRunAll{}); err != nil {
			return false, nil
		}
		return gated(p) == want, nil
	})
	if err != nil {
		t.Fatalf("the webhook never came to gate=%v: %v", want, err)
	}
}

// countingBlackhole accepts connections, never answers, and counts them: a
// positive signal that the controller is inspecting.
func countingBlackhole(t *testing.T) (host string, accepted *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int32{}
	conns := make(chan net.Conn, 1024)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conns <- c
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		for {
			select {
			case c := <-conns:
				_ = c.Close()
			default:
				return
			}
		}
	})
	return l.Addr().String(), accepted
}

// restartSuiteControllerOnCleanup restarts the suite controller when the
// case ends, if the case left it stopped.
func restartSuiteControllerOnCleanup(t *testing.T) {
	t.Cleanup(func() {
		if suiteController != nil && suiteController.cancel != nil {
			return
		}
		var err error
		if suiteController, err = startController(suiteOptions()); err != nil {
			t.Errorf("restarting the suite controller: %v", err)
		}
	})
}

// TestPodsGatedByOthersArePlaced: a pod that carries the gate when it is
// created, with none of the webhook's labels, is placed all the same; and
// while no config exists it is released, not stranded.
func TestPodsGatedByOthersArePlaced(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "pregated", nil)
	if p := h.create(makePod(h.ns, "restored").image(imgARM64S390X).withGate().obj()); p.Labels[placement.SchedulingGateLabel] != placement.SchedulingGateLabelGated {
		t.Errorf("the webhook did not label the pod gated by others: labels %v", p.Labels)
	}
	pod := h.waitReleased("restored")
	h.expectLabels(pod, map[string]string{placement.NodeAffinityLabel: placement.LabelValueSet, placement.MultiArchLabel: ""})
	if arch := h.waitBound("restored"); arch != "arm64" && arch != "s390x" {
		t.Errorf("bound to %s, want arm64 or s390x", arch)
	}

	if err := deleteConfig(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.create(makePod(h.ns, "no-config").image(imgARM64S390X).withGate().obj())
	pod = h.waitReleased("no-config")
	h.expectLabels(pod, map[string]string{placement.NodeAffinityLabel: placement.LabelValueNotSet})
	h.waitEvent("no-config", placement.EventSchedGateRemovalSuccess)
	h.waitBound("no-config")
}

// TestGatesOnlyWhileAControllerRuns: the webhook gates only while a
// placement controller's heartbeat is fresh; a controller told to stop
// releases what it holds on its way out.
func TestGatesOnlyWhileAControllerRuns(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "heartbeat", nil)
	restartSuiteControllerOnCleanup(t)

	// A pod held by an inspection that hangs, seen by the controller.
	host, accepted := countingBlackhole(t)
	if held := h.create(makePod(h.ns, "held").image(host + "/placement/hangs:1").obj()); !gated(held) {
		t.Fatal("the pod was not gated while the controller runs")
	}
	if err := wait.PollUntilContextTimeout(h.ctx, bed.Interval, bed.LongTimeout, true, func(context.Context) (bool, error) {
		return accepted.Load() > 0, nil
	}); err != nil {
		t.Fatal("the controller never inspected the held pod")
	}

	suiteController.stop()
	pod := h.waitReleased("held")
	h.expectLabels(pod, map[string]string{placement.NodeAffinityLabel: placement.LabelValueNotSet})
	if note := h.waitEvent("held", placement.EventSchedGateRemovalSuccess); !strings.Contains(note, "stopped") {
		t.Errorf("event note %q does not say the controller stopped", note)
	}
	h.waitBound("held")

	// No controller: the config is there, but nobody would remove a gate.
	waitWebhookGates(h.ctx, t, h.ns, false)
	if p := h.create(makePod(h.ns, "unattended").image(imgAMD64Only).obj()); gated(p) {
		t.Error("a pod was gated with no controller running")
	}
	h.waitBound("unattended")

	var err error
	if suiteController, err = startController(suiteOptions()); err != nil {
		t.Fatal(err)
	}
	waitWebhookGates(h.ctx, t, h.ns, true)
	h.create(makePod(h.ns, "attended").image(imgAMD64Only).obj())
	h.expectLabels(h.waitReleased("attended"), map[string]string{placement.SingleArchLabel: "", placement.ArchLabelFor("amd64"): ""})
}

// TestConfigDeletedWhileTheWebhookIsDown: uninstalling in any order works:
// with the webhooks unreachable, the config can still be deleted, and its
// deletion releases every gated pod.
func TestConfigDeletedWhileTheWebhookIsDown(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "webhookdown", nil)
	ppc := &multiarchv1beta1.PodPlacementConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "tuning"},
		Spec:       multiarchv1beta1.PodPlacementConfigSpec{Priority: 1, Plugins: scoringFor("arm64", 10)},
	}
	if err := k8s.Create(h.ctx, ppc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ppc) })

	// The webhooks go away: their registrations point at a closed port.
	dead := "https://" + closedPortRegistry(t) + "/"
	restore := pointWebhooksAt(t, dead)
	t.Cleanup(restore)

	// Pods still get gated by others (the mutating webhook is down and
	// fails open); a hanging registry holds them.
	image := blackholeRegistry(t) + "/placement/hangs:1"
	const n = 10
	for i := range n {
		p := h.create(makePod(h.ns, fmt.Sprintf("held-%d", i)).image(image).withGate().obj())
		if !gated(p) {
			t.Fatalf("pod %s lost its gate", p.Name)
		}
	}
	if err := deleteConfig(h.ctx); err != nil {
		t.Fatalf("deleting the config with the webhook down: %v", err)
	}
	for i := range n {
		pod := h.waitReleased(fmt.Sprintf("held-%d", i))
		h.expectLabels(pod, map[string]string{placement.NodeAffinityLabel: placement.LabelValueNotSet})
	}
	if note := h.waitEvent("held-0", placement.EventSchedGateRemovalSuccess); !strings.Contains(note, "deleted") {
		t.Errorf("event note %q does not say why", note)
	}
}

// pointWebhooksAt points every placement webhook registration at url and
// returns the function that restores them.
func pointWebhooksAt(t *testing.T, url string) (restore func()) {
	t.Helper()
	ctx := context.Background()
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: placement.WebhookConfigurationName}, mwc); err != nil {
		t.Fatal(err)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: "archway-pod-placement-validation"}, vwc); err != nil {
		t.Fatal(err)
	}
	savedM, savedV := mwc.DeepCopy(), vwc.DeepCopy()
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig.URL = &url
	}
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig.URL = &url
	}
	if err := k8s.Update(ctx, mwc); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Update(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	return func() {
		for _, pair := range []struct{ saved, live client.Object }{
			{savedM, &admissionregistrationv1.MutatingWebhookConfiguration{}},
			{savedV, &admissionregistrationv1.ValidatingWebhookConfiguration{}},
		} {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(pair.saved), pair.live); err != nil {
				t.Errorf("restoring the webhooks: %v", err)
				continue
			}
			switch live := pair.live.(type) {
			case *admissionregistrationv1.MutatingWebhookConfiguration:
				live.Webhooks = savedM.Webhooks
			case *admissionregistrationv1.ValidatingWebhookConfiguration:
				live.Webhooks = savedV.Webhooks
			}
			if err := k8s.Update(ctx, pair.live); err != nil {
				t.Errorf("restoring the webhooks: %v", err)
			}
		}
	}
}

// waitHeartbeatSeen waits, when a controller holds the heartbeat lease,
// until the webhook gates a dry-run pod in the default namespace: a case
// that creates pods right after starting a controller or changing the
// config sees them gated. It needs a config selecting every namespace.
func waitHeartbeatSeen(ctx context.Context) error {
	lease := &coordinationv1.Lease{}
	key := types.NamespacedName{Namespace: suiteOptions().Namespace, Name: placement.HeartbeatLeaseName}
	if err := k8s.Get(ctx, key, lease); err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return client.IgnoreNotFound(err)
	}
	return wait.PollUntilContextTimeout(ctx, bed.Interval, bed.DefaultTimeout, true, func(ctx context.Context) (bool, error) {
		p := makePod(metav1.NamespaceDefault, "probe").image(imgAMD64Only).obj()
		if err := k8s.Create(ctx, p, dryRunAll{}); err != nil {
			return false, nil
		}
		return gated(p), nil
	})
}

// TestGatedPodsTheWebhookNeverSawAreReleased: a pod created with the gate
// where the webhook is never called (a reserved namespace) carries no gated
// label, so the controller's watch does not see it; the controller's sweep
// labels it, and it is released.
func TestGatedPodsTheWebhookNeverSawAreReleased(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	h := newHarness(t, "unseen", nil)
	if err := ensureNamespace(h.ctx, metav1.NamespacePublic); err != nil {
		t.Fatal(err)
	}
	h.ns = metav1.NamespacePublic
	name := "unseen-" + string(uuid.NewUUID())[:8]
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}, client.GracePeriodSeconds(0))
	})
	if p := h.create(makePod(h.ns, name).image(imgAMD64Only).withGate().obj()); !gated(p) || p.Labels[placement.SchedulingGateLabel] != "" {
		t.Fatalf("want a gated pod without the webhook's label, got gates %v labels %v", p.Spec.SchedulingGates, p.Labels)
	}
	h.waitReleased(name)
}
