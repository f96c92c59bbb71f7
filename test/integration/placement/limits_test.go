package placement

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/test/bed"
)

// noNode is a node label no node has.
const noNode = "archway.test/no-such-node"

// TestSlowImagesDoNotHoldPlacement: a tenant's pods whose images sit on a
// registry that never answers do not hold placement. With one worker (so
// that a pod holding it would stop every other), a pod of 2,000 images
// is released without inspection at once, saying why, and a pod of 64
// such images holds the worker for one reconcile's timeout at a time;
// a pod of an ordinary image created after both is still placed.
func TestSlowImagesDoNotHoldPlacement(t *testing.T) {
	proxy := startHoldingProxy(t) // never answers a manifest request
	opts := suiteOptions()
	opts.InsecureRegistries = append(opts.InsecureRegistries, proxy.host)
	opts.Workers = 1
	opts.ReconcileTimeout = 2 * time.Second
	h := newHarness(t, "slow-images", nil)
	suiteController.stop()
	var err error
	if suiteController, err = startController(opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proxy.release()
		deletePods(context.Background(), h.ns)
		suiteController.stop()
		var err error
		if suiteController, err = startController(suiteOptions()); err != nil {
			t.Errorf("restarting the suite controller: %v", err)
			return
		}
		// The next case expects the webhook to gate again.
		if err := wait.PollUntilContextTimeout(context.Background(), bed.Interval, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
			p := makePod(h.ns, "probe").image(imgAMD64Only).obj()
			return k8s.Create(ctx, p, dryRunAll{}) == nil && gated(p), nil
		}); err != nil {
			t.Errorf("the webhook never gated after the suite controller restarted: %v", err)
		}
	})
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	err = wait.PollUntilContextTimeout(h.ctx, bed.Interval, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
		p := makePod(h.ns, "probe").image(imgAMD64Only).obj()
		return k8s.Create(ctx, p, dryRunAll{}) == nil && gated(p), nil
	})
	if err != nil {
		t.Fatalf("the webhook never gated after the controller restarted: %v", err)
	}
	images := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s/t/i%d:1", proxy.host, i)
		}
		return out
	}
	// Both select no node: once released they stay unscheduled, and kwok
	// never writes the status of 2,000 containers. (The hoarder had
	// 10,000 once: decoding that pod took the in-process webhook, under
	// the race detector on a loaded machine, past the 3 s admission
	// timeout, so the apiserver admitted it ungated, as it should.)
	if pod := h.create(makePod(h.ns, "hoarder").image(images(2000)...).nodeSelector(noNode, "true").obj()); !gated(pod) {
		t.Fatal("the pod of 2,000 images was not gated")
	}
	if pod := h.create(makePod(h.ns, "slow").image(images(64)...).nodeSelector(noNode, "true").obj()); !gated(pod) {
		t.Fatal("the pod of 64 images was not gated")
	}
	start := time.Now()
	if pod := h.create(makePod(h.ns, "ordinary").image(imgAMD64Only).obj()); !gated(pod) {
		t.Fatal("the ordinary pod was not gated")
	}
	ordinary := h.waitReleased("ordinary")
	t.Logf("the ordinary pod was released %v after its creation", time.Since(start).Round(time.Millisecond))
	if h.waitEvent("ordinary", placement.EventPredicateSet) == "" {
		t.Error("the ordinary pod was not placed")
	}
	if ordinary.Spec.Affinity == nil || ordinary.Spec.Affinity.NodeAffinity == nil {
		t.Error("the ordinary pod has no node affinity")
	}
	h.waitReleased("hoarder")
	note := h.waitEvent("hoarder", placement.EventInspectionError)
	if !strings.Contains(note, "The pod has 2000 images; placement inspects at most 64 per pod") {
		t.Errorf("the hoarder's event says %q", note)
	}
	if got := proxy.counts()["GET manifests"] + proxy.counts()["HEAD manifests"]; got > 64*opts.InspectionTries {
		t.Errorf("%d manifest requests: the hoarder's images were inspected", got)
	}
}
