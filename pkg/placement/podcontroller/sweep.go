package podcontroller

import (
	"context"
	"encoding/json"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/archway-build/archway/pkg/placement"
)

// sweepPageSize bounds the pods one page of a sweep holds in memory.
const sweepPageSize = 500

// gateSweeper finds the pods that carry the scheduling gate without the
// gated label, and labels them. The controller watches only labelled pods
// (placement.GatedSelector): its memory grows with the pods it has to
// place, not with every pending pod of the cluster. The webhook labels each pod it gates and
// each pod created with the gate already; the sweeper catches the rest
// (pods created while the webhook was down or outside its namespaces, or
// whose label was removed), when the controller starts and then every
// interval, paging through the unbound pods so that a sweep holds one page
// at a time.
type gateSweeper struct {
	reader   client.Reader // the apiserver: a sweep must see what no cache holds
	writer   client.Writer
	interval time.Duration
	log      logr.Logger
}

var (
	_ manager.Runnable               = (*gateSweeper)(nil)
	_ manager.LeaderElectionRunnable = (*gateSweeper)(nil)
)

// NeedLeaderElection: the leader places the pods the sweep brings in.
func (s *gateSweeper) NeedLeaderElection() bool { return true }

// Start sweeps at once, then every interval until ctx ends. A failed sweep
// is logged and tried again at the next tick.
func (s *gateSweeper) Start(ctx context.Context) error {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		if n, err := s.sweep(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.log.Error(err, "sweeping for gated pods without the gated label", "labelled", n)
		} else if n > 0 {
			s.log.Info("labelled gated pods the webhook had not seen", "pods", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sweep labels every unbound pod that carries the gate but not the gated
// label, and returns how many it labelled.
func (s *gateSweeper) sweep(ctx context.Context) (int, error) {
	labelled := 0
	err := ForEachUnboundPod(ctx, s.reader, func(pod *corev1.Pod) error {
		if !needsGatedLabel(pod) {
			return nil
		}
		switch err := s.label(ctx, pod); {
		case err == nil:
			labelled++
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Gone, or changed since the page was read (bound, released,
			// relabelled): the next sweep sees it as it is then.
		default:
			return err
		}
		return nil
	})
	return labelled, err
}

// needsGatedLabel reports whether a pod carries the gate but would not be
// seen by the controller's watch.
func needsGatedLabel(pod *corev1.Pod) bool {
	return placement.HasGate(pod) && pod.DeletionTimestamp == nil && pod.Spec.NodeName == "" &&
		pod.Labels[placement.SchedulingGateLabel] != placement.SchedulingGateLabelGated
}

// label sets the gated label on pod with a merge patch that carries the
// resourceVersion it was read at: a pod released or changed in between is
// refused with a conflict rather than labelled gated after its release.
func (s *gateSweeper) label(ctx context.Context, pod *corev1.Pod) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": pod.ResourceVersion,
		"labels":          map[string]string{placement.SchedulingGateLabel: placement.SchedulingGateLabelGated},
	}})
	if err != nil {
		return err
	}
	return s.writer.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch))
}

// ForEachUnboundPod calls fn for every pod no node was chosen for, reading
// them from reader a page at a time. It stops at fn's first error.
func ForEachUnboundPod(ctx context.Context, reader client.Reader, fn func(*corev1.Pod) error) error {
	opts := []client.ListOption{client.MatchingFieldsSelector{Selector: placement.UnboundSelector()}, client.Limit(sweepPageSize)}
	for {
		list := &corev1.PodList{}
		if err := reader.List(ctx, list, opts...); err != nil {
			return err
		}
		for i := range list.Items {
			if err := fn(&list.Items[i]); err != nil {
				return err
			}
		}
		if list.Continue == "" {
			return nil
		}
		opts = []client.ListOption{client.MatchingFieldsSelector{Selector: placement.UnboundSelector()}, client.Limit(sweepPageSize), client.Continue(list.Continue)}
	}
}
