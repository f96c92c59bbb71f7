package podcontroller

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/image"
)

// podReconciler places gated pods. It reads the pod, the config and the
// pull secrets from informer caches, inspects the pod's images in
// parallel, computes the outcome with decide, writes the pod once and then
// records one event.
type podReconciler struct {
	pods      client.Reader // the gated-pod cache
	configs   client.Reader // the manager's cache: cluster and namespace configs
	writer    client.Client
	secrets   pullSecrets
	inspector image.Inspector
	// built answers for images archway Builds pushed, before the
	// inspector; nil: never.
	built    *builtImages
	recorder events.EventRecorder
	metrics  *ControllerMetrics
	retries  *retryTracker
	policy   retryPolicy
	imagePar int
	// maxImages bounds the images inspected per pod, timeout the
	// inspection of one reconcile (placement.Options).
	maxImages int
	timeout   time.Duration
	applied   *AppliedCounter
	now       func() time.Time
}

func (r *podReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.pods.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			r.retries.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !placement.HasGate(pod) || pod.DeletionTimestamp != nil {
		r.retries.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	logger := log.FromContext(ctx)

	cfg := &multiarchv1beta1.ClusterPodPlacementConfig{}
	switch err := r.configs.Get(ctx, types.NamespacedName{Name: multiarchv1beta1.ClusterPodPlacementConfigName}, cfg); {
	case apierrors.IsNotFound(err):
		return r.write(ctx, pod, ReleaseWithoutConfig(pod, "no ClusterPodPlacementConfig exists"))
	case err != nil:
		return ctrl.Result{}, err
	case cfg.DeletionTimestamp != nil:
		return r.write(ctx, pod, ReleaseWithoutConfig(pod, "the ClusterPodPlacementConfig is being deleted"))
	}

	local := &multiarchv1beta1.PodPlacementConfigList{}
	if err := r.configs.List(ctx, local, client.InNamespace(pod.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	pol := PolicyFor(pod, &cfg.Spec, local.Items)
	if d, done := preflight(pod, pol); done {
		return r.write(ctx, pod, d)
	}
	if images, _ := podImages(pod); r.maxImages > 0 && len(images) > r.maxImages {
		return r.write(ctx, pod, tooManyImages(pod, pol, len(images), r.maxImages))
	}
	// One pod holds a worker for at most timeout: what is not inspected
	// by then fails this try, retried later while the worker serves
	// other pods.
	ictx := ctx
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ictx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	results, err := r.inspect(ictx, pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	failures := 0
	if err := inspectionError(results); err != nil {
		state := r.retries.failed(req.NamespacedName, pod.UID, r.now())
		failures = state.failures
		// A permanent answer (manifest unknown, unauthorized, denied, a
		// malformed reference) is not retried: the pod is released at once.
		if retry, delay := r.policy.next(state, r.now()); retry && !permanentFailure(results) {
			r.metrics.retries.Inc()
			logger.V(1).Info("image inspection failed; retrying", "failures", state.failures, "after", delay, "error", err.Error())
			return ctrl.Result{RequeueAfter: delay}, nil
		}
	}
	return r.write(ctx, pod, decide(pod, pol, results, failures))
}

// tooManyImages releases, without inspecting them, a pod with more images
// than placement inspects per pod: to the fallback architecture when one
// is configured, else unchanged.
func tooManyImages(pod *corev1.Pod, pol policy, n, limit int) decision {
	err := fmt.Errorf("the pod has %d images and placement inspects at most %d per pod (maxImagesPerPod)", n, limit)
	d := decideAfterError(pod, pol, err)
	labelInspectionError(d.Pod, err, 0)
	what := "removed the scheduling gate with the required node affinity unchanged"
	if d.Outcome == outcomeFallback {
		what = "set the node affinity to the fallback architecture " + pol.fallback + " and removed the scheduling gate"
	}
	d.Message = truncate(fmt.Sprintf("The pod has %d images; placement inspects at most %d per pod (maxImagesPerPod): none inspected, %s", n, limit, what))
	return d
}

// ReleaseWithoutConfig releases a pod when placement is off.
func ReleaseWithoutConfig(pod *corev1.Pod, why string) decision {
	return release(pod, outcomeReleased, corev1.EventTypeNormal, placement.EventSchedGateRemovalSuccess,
		"Successfully removed the "+placement.SchedulingGate+" scheduling gate: "+why)
}

// inspect asks the inspector about each unique image of the pod, several
// at once, with the credentials a kubelet would use.
func (r *podReconciler) inspect(ctx context.Context, pod *corev1.Pod) ([]imageResult, error) {
	keyring, err := r.secrets.keyring(ctx, pod)
	if err != nil {
		return nil, err
	}
	images, always := podImages(pod)
	os := podOS(pod)
	results := make([]imageResult, len(images))
	var g errgroup.Group
	g.SetLimit(r.imagePar)
	for i, name := range images {
		g.Go(func() error {
			ref, auth := image.Reference{Name: name, Refresh: always[name]}, keyring.Lookup(name)
			ps, found, err := r.fromBuild(ctx, pod.Namespace, ref, auth)
			if !found && err == nil {
				ps, _, err = r.inspector.Architectures(ctx, ref, auth)
			}
			results[i] = imageResult{image: name, err: err}
			if err == nil {
				results[i].archs = ps.Architectures(os)
			} else {
				results[i].archs = sets.New[string]()
			}
			// Each image's error stays in its result: one failed image
			// must not stop the others.
			return nil
		})
	}
	_ = g.Wait()
	return results, nil
}

// fromBuild answers for an image a completed Build of ns pushed, and
// whether it did.
func (r *podReconciler) fromBuild(ctx context.Context, ns string, ref image.Reference, auth image.Auth) (image.Platforms, bool, error) {
	if r.built == nil {
		return nil, false, nil
	}
	ps, found, err := r.built.platforms(ctx, ns, ref, auth)
	if found {
		log.FromContext(ctx).V(1).Info(describeBuilt(ref.Name, ps))
	}
	return ps, found, err
}

// writeTimeout bounds a pod write that goes on after the controller was
// told to stop.
const writeTimeout = 10 * time.Second

// write updates the pod as decided, then records the decision's event.
// A conflict means the pod changed under us: it is handled again.
func (r *podReconciler) write(ctx context.Context, pod *corev1.Pod, d decision) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	// A write under way when the controller is told to stop is finished,
	// not cut short: cut, the apiserver may still apply it without our
	// learning so, and the pod is released with no event (21-31 of 500 when
	// build-controller got SIGTERM in the middle of a backlog).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	err := r.writer.Update(ctx, d.Pod)
	switch {
	case apierrors.IsConflict(err):
		// The pod changed: its newer version is on its way through the
		// informer and will be handled afresh.
		return ctrl.Result{}, nil
	case apierrors.IsNotFound(err):
		r.retries.forget(client.ObjectKeyFromObject(pod))
		return ctrl.Result{}, nil
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		// The apiserver refused the placement itself (e.g. a webhook or
		// a rule we did not foresee): never hold the pod, release it as it
		// is and say why.
		logger.Error(err, "the apiserver refused the placed pod; releasing it unchanged")
		fallback := release(pod, outcomeReleased, corev1.EventTypeWarning, placement.EventSchedGateRemovalFailed,
			"Could not set the node affinity ("+err.Error()+"); removed the scheduling gate with the pod unchanged")
		if err2 := r.writer.Update(ctx, fallback.Pod); err2 != nil {
			return ctrl.Result{}, fmt.Errorf("releasing pod %s/%s: %w", pod.Namespace, pod.Name, err2)
		}
		d = fallback
	case err != nil:
		return ctrl.Result{}, err
	}
	r.retries.forget(client.ObjectKeyFromObject(pod))
	r.metrics.Pods.WithLabelValues(d.Outcome).Inc()
	r.metrics.Gated.Observe(r.now().Sub(pod.CreationTimestamp.Time).Seconds())
	r.recorder.Eventf(d.Pod, nil, d.EventType, d.Reason, "Place", "%s", d.Message)
	for _, name := range d.appliedConfigs {
		r.applied.record(types.NamespacedName{Namespace: pod.Namespace, Name: name}, r.now())
	}
	for _, e := range d.skipped {
		r.recorder.Eventf(d.Pod, nil, corev1.EventTypeNormal, placement.EventPreferenceSkipped, "Place",
			"Did not add the preferred affinity %s:%d from %s: %s", e.Architecture, e.Weight, e.Source, e.skipped)
	}
	logger.V(1).Info("released gated pod", "outcome", d.Outcome, "reason", d.Reason)
	return ctrl.Result{}, nil
}
