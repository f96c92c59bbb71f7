package protection

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	schedulingv1alpha1 "github.com/archway-build/archway/pkg/apis/scheduling/v1alpha1"
)

// statusInterval is the least time between two status writes of a replica
// for denials: a flood of denied requests costs one write a second.
const statusInterval = time.Second

// denialCounter keeps the denials a replica made since its last status
// write.
type denialCounter struct {
	mu    sync.Mutex
	count int64
	last  *schedulingv1alpha1.Denial
	// kick wakes the status controller (never blocks: one pending wake
	// is enough).
	kick chan event.GenericEvent
}

func newDenialCounter() *denialCounter {
	return &denialCounter{kick: make(chan event.GenericEvent, 1)}
}

// record counts a denial, with its strings cut to the status's limits.
func (c *denialCounter) record(d schedulingv1alpha1.Denial) {
	d.User, d.Namespace, d.Pod = cut(d.User, 253), cut(d.Namespace, 63), cut(d.Pod, 253)
	c.mu.Lock()
	c.count++
	c.last = &d
	c.mu.Unlock()
	select {
	case c.kick <- event.GenericEvent{Object: &schedulingv1alpha1.ControlPlaneProtection{ObjectMeta: metav1.ObjectMeta{Name: schedulingv1alpha1.ControlPlaneProtectionName}}}:
	default:
	}
}

// take returns the denials so far and forgets them.
func (c *denialCounter) take() (int64, *schedulingv1alpha1.Denial) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, last := c.count, c.last
	c.count, c.last = 0, nil
	return n, last
}

// giveBack returns denials taken but not written.
func (c *denialCounter) giveBack(n int64, last *schedulingv1alpha1.Denial) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count += n
	if c.last == nil || (last != nil && last.Time.After(c.last.Time.Time)) {
		c.last = last
	}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// statusReconciler writes the ControlPlaneProtection's status: what each
// group enforces now (override considered), the conditions, and the
// denials this replica counted, added to those already written. Every
// replica runs it: they compute the same groups and conditions, and each
// adds its own denials under optimistic locking.
type statusReconciler struct {
	client    client.Client
	denials   *denialCounter
	now       func() time.Time
	lastWrite time.Time
}

// setupStatus adds the status controller to mgr: it follows the
// ControlPlaneProtection, the nodes' labels (for the protected nodes'
// count) and the denials, and looks again when an override lapses.
func setupStatus(mgr ctrl.Manager, denials *denialCounter) error {
	singleton := func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: schedulingv1alpha1.ControlPlaneProtectionName}}}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("control-plane-protection-status").
		For(&schedulingv1alpha1.ControlPlaneProtection{}).
		Watches(&metav1.PartialObjectMetadata{TypeMeta: nodeType}, handler.EnqueueRequestsFromMapFunc(singleton),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WatchesRawSource(source.Channel(denials.kick, handler.EnqueueRequestsFromMapFunc(singleton))).
		// Every replica writes its own denials.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(&statusReconciler{client: mgr.GetClient(), denials: denials, now: time.Now})
}

func (r *statusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name != schedulingv1alpha1.ControlPlaneProtectionName {
		return ctrl.Result{}, nil
	}
	cfg := &schedulingv1alpha1.ControlPlaneProtection{}
	if err := r.client.Get(ctx, req.NamespacedName, cfg); err != nil {
		// Gone: the denials counted are of no object any more.
		if apierrors.IsNotFound(err) {
			r.denials.take()
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cfg.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	now := r.now()
	var res ctrl.Result
	if next := nextChange(cfg, now); !next.IsZero() {
		res.RequeueAfter = next.Sub(now) + time.Millisecond
	}
	n, last := r.denials.take()
	if wait := statusInterval - now.Sub(r.lastWrite); n > 0 && wait > 0 {
		r.denials.giveBack(n, last)
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	list := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}}
	if err := r.client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		r.denials.giveBack(n, last)
		return ctrl.Result{}, err
	}
	nodes := make([]Node, 0, len(list.Items))
	for _, item := range list.Items {
		nodes = append(nodes, Node{Name: item.Name, Labels: item.Labels})
	}
	status := Status(cfg, nodes, now)
	status.Denials = addDenials(cfg.Status.Denials, n, last)
	if equality.Semantic.DeepEqual(status, cfg.Status) {
		return res, nil
	}
	updated := cfg.DeepCopy()
	updated.Status = status
	if err := r.client.Status().Update(ctx, updated); err != nil {
		r.denials.giveBack(n, last)
		if apierrors.IsConflict(err) {
			// Another replica wrote first: its status arrives through the
			// watch; add to it then (or soon, if the watch is slow).
			return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		return ctrl.Result{}, fmt.Errorf("writing the status of ControlPlaneProtection %s: %w", cfg.Name, err)
	}
	r.lastWrite = now
	return res, nil
}

// flushTimeout bounds the writing of a stopped replica's last denials.
const flushTimeout = 5 * time.Second

// flushDenials writes the denials counted since the status's last write
// (the write of the last second's denials waits for statusInterval), read
// and written straight to the apiserver: it runs once the replica's
// manager has stopped (its webhook, controllers and cache), so that a
// replica stopped by a rollout or a node drain loses none.
func flushDenials(ctx context.Context, c client.Client, reader client.Reader, denials *denialCounter) error {
	n, last := denials.take()
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg := &schedulingv1alpha1.ControlPlaneProtection{}
		if err := reader.Get(ctx, types.NamespacedName{Name: schedulingv1alpha1.ControlPlaneProtectionName}, cfg); err != nil {
			return err
		}
		cfg.Status.Denials = addDenials(cfg.Status.Denials, n, last)
		return c.Status().Update(ctx, cfg)
	})
	if apierrors.IsNotFound(err) {
		// Gone: the denials counted are of no object any more.
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing the last %d denials to the ControlPlaneProtection's status: %w", n, err)
	}
	return nil
}

// addDenials adds n denials, the last of them last, to what the status
// had.
func addDenials(had *schedulingv1alpha1.DenialStatus, n int64, last *schedulingv1alpha1.Denial) *schedulingv1alpha1.DenialStatus {
	if n == 0 {
		return had
	}
	out := &schedulingv1alpha1.DenialStatus{}
	if had != nil {
		out = had.DeepCopy()
	}
	out.Count += n
	if last != nil && (out.Last == nil || !last.Time.Before(&out.Last.Time)) {
		out.Last = last.DeepCopy()
	}
	return out
}

// Status is what cfg enforces at now on the nodes: each group's mode in
// effect, protected nodes and authorized subjects, and the conditions
// (their transition times kept from cfg's status when unchanged). The
// denials are left as cfg's status has them.
func Status(cfg *schedulingv1alpha1.ControlPlaneProtection, nodes []Node, now time.Time) schedulingv1alpha1.ControlPlaneProtectionStatus {
	out := schedulingv1alpha1.ControlPlaneProtectionStatus{
		ObservedGeneration: cfg.Generation,
		Conditions:         append([]metav1.Condition(nil), cfg.Status.Conditions...),
		Denials:            cfg.Status.Denials,
	}
	set := func(typ string, ok bool, reason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&out.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: cut(msg, 32768), ObservedGeneration: cfg.Generation,
			LastTransitionTime: metav1.NewTime(now),
		})
	}

	var unready, enforcing, informing, relaxed []string
	for _, g := range cfg.Spec.Groups {
		mode := EffectiveMode(cfg, g, now)
		protected := groupNodes(g.LabelSelector, nodes)
		out.Groups = append(out.Groups, schedulingv1alpha1.GroupStatus{
			Name: g.Name, Mode: mode, ProtectedNodes: int32(min(len(protected), math.MaxInt32)),
			AuthorizedUsers: g.AuthorizedUsers, AuthorizedGroups: g.AuthorizedGroups,
		})
		sel := g.LabelSelector
		if sel == nil {
			sel = DefaultLabelSelector()
		}
		switch s, err := metav1.LabelSelectorAsSelector(sel); {
		case err != nil || s.Empty():
			unready = append(unready, fmt.Sprintf("group %s's labelSelector is invalid, so every node is protected: %v", g.Name, err))
		case len(protected) == 0:
			unready = append(unready, fmt.Sprintf("group %s's labelSelector %s selects no node: nothing is protected (check the nodes' labels)", g.Name, s))
		}
		switch mode {
		case schedulingv1alpha1.ModeEnable:
			enforcing = append(enforcing, fmt.Sprintf("%s (%d protected nodes)", g.Name, len(protected)))
		case schedulingv1alpha1.ModeInform:
			informing = append(informing, string(g.Name))
		}
		if mode != g.Mode && g.Mode != "" {
			relaxed = append(relaxed, fmt.Sprintf("%s (mode %s)", g.Name, g.Mode))
		}
	}

	if len(unready) > 0 {
		set(schedulingv1alpha1.ConditionReady, false, "NodeSelectionProblem", strings.Join(unready, "; "))
	} else {
		set(schedulingv1alpha1.ConditionReady, true, "AsExpected", fmt.Sprintf("the webhook judges pods with generation %d", cfg.Generation))
	}

	o := cfg.Spec.Override
	switch {
	case len(enforcing) > 0:
		set(schedulingv1alpha1.ConditionEnforcing, true, "ModeEnable", "unauthorized requests are denied for group "+strings.Join(enforcing, ", "))
	case len(relaxed) > 0:
		set(schedulingv1alpha1.ConditionEnforcing, false, "Overridden", fmt.Sprintf("the override to mode %s until %s relaxes group %s",
			o.Mode, o.Until.UTC().Format(time.RFC3339), strings.Join(relaxed, ", ")))
	case len(informing) > 0:
		set(schedulingv1alpha1.ConditionEnforcing, false, "ModeInform", "no group denies; unauthorized requests are admitted with a warning for group "+strings.Join(informing, ", "))
	default:
		set(schedulingv1alpha1.ConditionEnforcing, false, "ModeDisable", "no group is enforced or reported")
	}

	switch Override(cfg, now) {
	case OverrideInEffect:
		msg := fmt.Sprintf("every group stricter than mode %s follows it until %s", o.Mode, o.Until.UTC().Format(time.RFC3339))
		if o.Reason != "" {
			msg += ": " + o.Reason
		}
		set(schedulingv1alpha1.ConditionOverridden, true, "InEffect", msg)
	case OverrideExpired:
		set(schedulingv1alpha1.ConditionOverridden, false, "Expired", fmt.Sprintf("the override to mode %s lapsed at %s: the groups' own modes apply; remove spec.override",
			o.Mode, o.Until.UTC().Format(time.RFC3339)))
	case OverrideTooFarAhead:
		set(schedulingv1alpha1.ConditionOverridden, false, "TooFarAhead", fmt.Sprintf("spec.override.until %s is more than %s ahead: the override is not followed; set an earlier time",
			o.Until.UTC().Format(time.RFC3339), schedulingv1alpha1.MaxOverride))
	default:
		set(schedulingv1alpha1.ConditionOverridden, false, "NotSet", "spec.override is not set")
	}
	return out
}
