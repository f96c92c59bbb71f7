package config

import (
	"context"
	"errors"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/podcontroller"
)

// deletedConfigs remembers the UIDs of PodPlacementConfigs whose deletion
// was observed: their claims are stale for certain, with no grace.
type deletedConfigs struct {
	mu   sync.Mutex
	uids map[types.UID]time.Time
}

func (d *deletedConfigs) add(uid types.UID, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.uids == nil {
		d.uids = map[types.UID]time.Time{}
	}
	d.uids[uid] = now
	for u, t := range d.uids {
		if now.Sub(t) > 10*time.Minute {
			delete(d.uids, u)
		}
	}
}

func (d *deletedConfigs) has(uid types.UID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.uids[uid]
	return ok
}

// configStatusReconciler keeps, for one namespace's PodPlacementConfigs,
// the priority claims (deleting stale ones, claiming for a config created
// while the webhook was away) and each config's status.
type configStatusReconciler struct {
	configs client.Reader // the manager's cache
	claims  client.Reader // the claim Leases' cache
	writer  client.Client
	direct  placement.PriorityClaims
	deleted *deletedConfigs
	applied *podcontroller.AppliedCounter
}

func (r *configStatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	requeue, err := r.collect(ctx, req.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	c := &multiarchv1beta1.PodPlacementConfig{}
	switch err := r.configs.Get(ctx, req.NamespacedName, c); {
	case apierrors.IsNotFound(err):
		r.applied.Take(req.NamespacedName)
		return ctrl.Result{RequeueAfter: requeue}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if c.DeletionTimestamp != nil {
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	claimed := metav1.Condition{Type: multiarchv1beta1.ConditionPriorityClaimed, Status: metav1.ConditionTrue,
		Reason: multiarchv1beta1.ReasonPriorityClaimed, Message: "This config holds priority " + placement.Itoa(c.Spec.Priority) + " in its namespace", ObservedGeneration: c.Generation}
	if err := r.ensureClaim(ctx, c); err != nil {
		if !isHeld(err) {
			return ctrl.Result{}, err
		}
		claimed.Status, claimed.Reason, claimed.Message = metav1.ConditionFalse, multiarchv1beta1.ReasonPriorityHeld, err.Error()
		if requeue == 0 || requeue > placement.PriorityClaimGrace {
			requeue = placement.PriorityClaimGrace
		}
	}
	a := r.applied.Take(req.NamespacedName)
	base := c.DeepCopy()
	c.Status.AppliedPods += a.Pods
	if !a.Last.IsZero() {
		c.Status.LastAppliedTime = &metav1.Time{Time: a.Last.Truncate(time.Second)}
	}
	meta.SetStatusCondition(&c.Status.Conditions, claimed)
	if equalConfigStatus(base.Status, c.Status) {
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	if err := r.writer.Status().Patch(ctx, c, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		r.applied.PutBack(req.NamespacedName, a)
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// ensureClaim makes c hold its priority's claim unless it already does;
// the error says who holds it.
func (r *configStatusReconciler) ensureClaim(ctx context.Context, c *multiarchv1beta1.PodPlacementConfig) error {
	l := &coordinationv1.Lease{}
	err := r.claims.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: placement.PriorityClaimName(c.Spec.Priority)}, l)
	if err == nil && types.UID(l.Annotations[placement.PriorityClaimUIDAnnotation]) == c.UID {
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return r.direct.Claim(ctx, c, false)
}

// collect deletes the namespace's stale claims. It returns when to look
// again for claims that may go stale once their grace is over (0: none).
func (r *configStatusReconciler) collect(ctx context.Context, namespace string) (time.Duration, error) {
	var leases coordinationv1.LeaseList
	if err := r.claims.List(ctx, &leases, client.InNamespace(namespace)); err != nil {
		return 0, err
	}
	logger := log.FromContext(ctx)
	var requeue time.Duration
	now := r.direct.Now()
	for i := range leases.Items {
		l := &leases.Items[i]
		priority, ok := placement.ClaimPriority(l)
		if !ok {
			continue
		}
		var holder *multiarchv1beta1.PodPlacementConfig
		holderUID := types.UID(l.Annotations[placement.PriorityClaimUIDAnnotation])
		if l.Spec.HolderIdentity != nil {
			h := &multiarchv1beta1.PodPlacementConfig{}
			switch err := r.direct.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: *l.Spec.HolderIdentity}, h); {
			case err == nil:
				holder = h
			case !apierrors.IsNotFound(err):
				return 0, err
			}
		}
		switch placement.JudgeClaim(l, "", priority, holder, r.deleted.has(holderUID), now, r.direct.Grace) {
		case placement.ClaimStale:
			err := r.writer.Delete(ctx, l, client.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return 0, err
			}
			logger.V(1).Info("deleted a stale priority claim", "claim", l.Name, "holder", holderUID)
		case placement.ClaimHeld:
			if holder == nil || holder.UID != holderUID || holder.Spec.Priority != priority {
				// Held only by its grace: look again when it is over.
				wait := l.Spec.RenewTime.Add(r.direct.Grace).Sub(now) + time.Second
				if requeue == 0 || wait < requeue {
					requeue = wait
				}
			}
		}
	}
	return requeue, nil
}

func isHeld(err error) bool {
	var held *placement.PriorityHeldError
	return errors.As(err, &held)
}

func equalConfigStatus(a, b multiarchv1beta1.PodPlacementConfigStatus) bool {
	if a.AppliedPods != b.AppliedPods || !a.LastAppliedTime.Equal(b.LastAppliedTime) || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message || x.ObservedGeneration != y.ObservedGeneration {
			return false
		}
	}
	return true
}

// configStatusHandler enqueues a config on its events and remembers the
// UIDs of deleted ones.
func configStatusHandler(deleted *deletedConfigs, now func() time.Time) handler.TypedEventHandler[client.Object, reconcile.Request] {
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			deleted.add(e.Object.GetUID(), now())
			enqueue(e.Object, q)
		},
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
	}
}

// claimToHolder maps a claim Lease to the config it names, so a claim's
// change brings its namespace's claims to be collected.
func claimToHolder(_ context.Context, o client.Object) []reconcile.Request {
	l, ok := o.(*coordinationv1.Lease)
	if !ok || l.Spec.HolderIdentity == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l.Namespace, Name: *l.Spec.HolderIdentity}}}
}
