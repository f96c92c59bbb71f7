package buildconfig

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
)

// The RBAC this code needs is written, each rule with its reason, in
// manifests/build-controller/rbac/role.yaml
// (TestInstall in test/e2e/install shows each is needed).

// Options tune the controller.
type Options struct {
	// SkipNameValidation lets a process start the controller more than
	// once (tests that restart it).
	SkipNameValidation bool
}

// Reconciler keeps BuildConfigs and their builds in step.
type Reconciler struct {
	Client  client.Client
	Starter *instantiate.Starter
}

// Setup adds the BuildConfig controller to mgr; starter starts the builds
// of ConfigChange triggers.
func Setup(mgr ctrl.Manager, starter *instantiate.Starter, opts Options) error {
	r := &Reconciler{Client: mgr.GetClient(), Starter: starter}
	return ctrl.NewControllerManagedBy(mgr).
		Named("buildconfig").
		For(&buildv1.BuildConfig{}).
		Owns(&buildv1.Build{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, SkipNameValidation: ptr.To(opts.SkipNameValidation)}).
		Complete(r)
}

// Reconcile reads a BuildConfig and its builds, decides (Decide), and acts:
// lastVersion first (a start after it then numbers past every build),
// then the ConfigChange build, cancellations and deletions.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bc := &buildv1.BuildConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, bc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if bc.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	builds, err := r.builds(ctx, bc)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan := Decide(bc, builds)
	if plan.LastVersion != nil {
		bc.Status.LastVersion = *plan.LastVersion
		if err := r.Client.Status().Update(ctx, bc); err != nil {
			if apierrors.IsConflict(err) {
				// The BuildConfig changed after the cache's copy: its
				// newer version comes with a watch event and another
				// reconcile.
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("raising status.lastVersion to %d: %w", *plan.LastVersion, err)
		}
	}
	if plan.StartConfigChange && !paused(bc) {
		b, err := r.Starter.Start(ctx, bc.Namespace, bc.Name, instantiate.Request{
			TriggeredBy: []buildv1.BuildTriggerCause{{Message: instantiate.CauseConfigChange}},
			LastVersion: ptr.To[int64](0),
		})
		switch {
		case errors.Is(err, instantiate.ErrLastVersionMismatch):
			// Started meanwhile, by this trigger or by hand.
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("starting the ConfigChange build: %w", err)
		default:
			log.FromContext(ctx).Info("started the ConfigChange build", "build", b.Name)
		}
	}
	for _, name := range plan.Cancel {
		b := &buildv1.Build{}
		b.Namespace, b.Name = bc.Namespace, name
		patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"cancelled":true}}`))
		if err := r.Client.Status().Patch(ctx, b, patch); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("cancelling queued build %s (runPolicy SerialLatestOnly): %w", name, err)
		}
	}
	for _, name := range plan.Delete {
		b := &buildv1.Build{}
		b.Namespace, b.Name = bc.Namespace, name
		if err := r.Client.Delete(ctx, b, client.PropagationPolicy("Background")); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("pruning build %s: %w", name, err)
		}
	}
	return ctrl.Result{}, nil
}

// builds lists bc's builds: labelled with its name (truncated to a label
// value) and annotated with it in full.
func (r *Reconciler) builds(ctx context.Context, bc *buildv1.BuildConfig) ([]buildv1.Build, error) {
	var list buildv1.BuildList
	if err := r.Client.List(ctx, &list, client.InNamespace(bc.Namespace),
		client.MatchingLabels{buildv1.BuildConfigLabel: buildv1.LabelValue(bc.Name)}); err != nil {
		return nil, fmt.Errorf("listing the builds of %s: %w", bc.Name, err)
	}
	out := list.Items[:0]
	for _, b := range list.Items {
		if b.Annotations[buildv1.BuildConfigAnnotation] == bc.Name {
			out = append(out, b)
		}
	}
	return out, nil
}

func paused(bc *buildv1.BuildConfig) bool {
	return bc.Annotations[buildv1.BuildConfigPausedAnnotation] == "true"
}
