package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/source"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/build/imagestream"
	"github.com/archway-build/archway/pkg/consistency"
)

// The RBAC this code needs is written, each rule with its reason, in
// manifests/build-controller/rbac/role.yaml
// (TestInstall in test/e2e/install shows each is needed).

// podOwnerIndex indexes pods by the UID of the Build that controls them.
const podOwnerIndex = "archway.build.owner-uid"

// missingSecretRetry is how often a build waiting for its push secret looks
// again.
const missingSecretRetry = 10 * time.Second

// Options tune the controller.
type Options struct {
	// Workers is how many Builds are reconciled at once. Default 8.
	Workers int
	// Registry receives the metrics. Default: controller-runtime's, which
	// the manager serves on its metrics endpoint.
	Registry prometheus.Registerer
	// SkipNameValidation lets a process start the controller more than
	// once (tests that restart it).
	SkipNameValidation bool
	// BaseInspector, when set, reads the platforms of base images known
	// before any pod (see BaseImages) so that a platform they lack fails
	// before the fan-out. Nil: each platform's pod checks its base alone.
	BaseInspector BaseInspector
	// ProgressInterval batches writes of a Build's progress alone
	// (status.platformsSummary): at most one per interval. Default
	// ProgressInterval; negative: every change is written at once.
	ProgressInterval time.Duration
	// InsecureRegistries are the registries (host or host:port) reached
	// over plain HTTP or without TLS verification, which the build pods
	// are told (the placement section's insecureRegistries: one list for
	// placement and builds).
	InsecureRegistries []string
	// Registries, when set, is the cluster's registry configuration, one
	// for placement and builds: build pods are handed its registries.conf
	// and pull through its mirrors, and a Build whose output or known base
	// is on a blocked registry fails before any pod. Nil: build pods pull
	// every image from its own registry.
	Registries RegistryConfig
}

// Reconciler runs Builds: it resolves their platforms, creates their pods
// and keeps their status.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Config    *configv1alpha1.BuildControllerConfig
	Recorder  events.EventRecorder
	Metrics   *Metrics
	Now       func() time.Time
	// Nodes are the cluster's Ready, schedulable nodes as resolution sees
	// them, kept up to date from node events.
	Nodes *NodeGroups

	// writes remembers the Build versions the controller's own writes
	// left behind, so that no reconcile acts on one the cache still holds
	// (nil: none is skipped).
	writes *consistency.Tracker
	// progress remembers when each running Build's status was last
	// written, to batch writes of its progress alone (nil: none batched).
	progress *progressWrites
	// accounts remembers the namespaces whose builder service account
	// and RoleBinding exist.
	accounts builderAccounts
	// Bases reads base images' platforms before the fan-out (nil: no
	// check before the pods).
	Bases BaseInspector
	// checks runs those reads off the workers.
	checks *baseChecks
	// InsecureRegistries are told to the build pods (PodPlan).
	InsecureRegistries []string
	// Registries is the cluster's registry configuration (nil: none).
	Registries RegistryConfig
}

// Setup adds the Build controller to mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg *configv1alpha1.BuildControllerConfig, opts Options) error {
	if cfg == nil || cfg.BuilderImage == "" {
		return errors.New("build controller: the configuration has no build.builderImage")
	}
	if opts.Workers == 0 {
		opts.Workers = 8
	}
	if opts.Registry == nil {
		opts.Registry = crmetrics.Registry
	}
	err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podOwnerIndex, func(o client.Object) []string {
		if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == "Build" && strings.HasPrefix(ref.APIVersion, buildv1.GroupName+"/") {
			return []string{string(ref.UID)}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing pods by their Build: %w", err)
	}
	m := NewMetrics(mgr.GetCache())
	if err := m.Register(opts.Registry); err != nil {
		return fmt.Errorf("registering the build metrics: %w", err)
	}
	r := &Reconciler{
		Client:             mgr.GetClient(),
		APIReader:          mgr.GetAPIReader(),
		Config:             cfg,
		Recorder:           mgr.GetEventRecorder("build-controller"),
		Metrics:            m,
		Now:                time.Now,
		Nodes:              NewNodeGroups(),
		writes:             consistency.NewTracker(),
		progress:           newProgressWrites(opts.ProgressInterval),
		Bases:              opts.BaseInspector,
		checks:             newBaseChecks(ctx),
		InsecureRegistries: opts.InsecureRegistries,
		Registries:         opts.Registries,
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("build").
		For(&buildv1.Build{}).
		Owns(&corev1.Pod{}).
		Watches(&buildv1.Build{}, handler.EnqueueRequestsFromMapFunc(r.queuedSiblings)).
		// Node events keep r.Nodes up to date and enqueue nothing; as a
		// source of the controller, no Build is reconciled before every
		// node has been counted.
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Node{}, nodeGroupsHandler(r.Nodes))).
		// The end of a base-image check enqueues its Build.
		WatchesRawSource(source.Channel(r.checks.done, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Workers, SkipNameValidation: ptr.To(opts.SkipNameValidation)}).
		Complete(r)
}

// Reconcile follows the skeleton of every archway controller: observe
// (the Build and its pods), decide (pure functions: Decide, NextStatus),
// act (create and delete pods), then one status write, then events. An
// ended Build only has its per-platform tags cleaned up (cleanup).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &buildv1.Build{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		if apierrors.IsNotFound(err) {
			r.writes.Forget(req.NamespacedName)
			r.progress.forget(req.NamespacedName)
			r.checks.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if b.DeletionTimestamp != nil {
		r.writes.Forget(req.NamespacedName)
		r.progress.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if b.Status.Phase.IsTerminal() {
		r.writes.Forget(req.NamespacedName)
		r.progress.forget(req.NamespacedName)
		// The per-platform tags are in the repository the output was
		// resolved to.
		if resolved, _, err := imagestream.Apply(b); err == nil {
			b = resolved
		}
		return r.cleanup(ctx, b)
	}
	s, ok := r.writes.Begin(b)
	if !ok {
		log.FromContext(ctx).V(1).Info("the cached build is older than our own last write; waiting for it", "resourceVersion", b.ResourceVersion)
		return ctrl.Result{}, nil
	}
	defer s.Done()
	now := metav1.NewTime(r.Now())
	withImages, f, done, err := r.resolveImageStreams(ctx, b, s)
	if err != nil || done {
		return ctrl.Result{}, err
	}
	if f != nil {
		return r.write(ctx, b, nil, FailurePlan(f), now)
	}
	b = withImages
	if f := BuildFailure(b); f != nil {
		return r.write(ctx, b, nil, FailurePlan(f), now)
	}
	platforms, resolved := resolvedPlatforms(b)
	if !resolved && !b.Status.Cancelled {
		// Before any pod: a pod mounting a missing ConfigMap would wait
		// for it without a word.
		f, err := r.trustedCAFailure(ctx, b)
		if err != nil {
			return ctrl.Result{}, err
		}
		if f != nil {
			return r.write(ctx, b, nil, FailurePlan(f), now)
		}
		// No pod yet: a blocked output or base fails the Build now.
		settings, err := r.registrySettings(ctx)
		if err != nil {
			return ctrl.Result{}, err
		}
		if f, err := BlockedFailure(b, settings); err != nil || f != nil {
			if err != nil {
				return ctrl.Result{}, err
			}
			return r.write(ctx, b, nil, FailurePlan(f), now)
		}
		queued, err := r.waitForTurn(ctx, b)
		if err != nil {
			return ctrl.Result{}, err
		}
		if queued != "" {
			// The Build stays New; its message says what it waits for (a
			// start clears it).
			return r.write(ctx, b, nil, QueuedPlan(queued), now)
		}
	}
	if !resolved {
		if res, done, err := r.firstResolution(ctx, b, now, s); done || err != nil {
			return res, err
		}
	}

	obs, err := r.observe(ctx, b, platforms)
	if err != nil || obs == nil {
		return ctrl.Result{}, err
	}
	b = obs.build
	s.Follow(b)
	// A Build read again is as stored: its references resolved anew from
	// the record.
	if b, _, err = imagestream.Apply(b); err != nil {
		return ctrl.Result{}, err
	}
	pl := PodPlan{Config: r.Config, Platforms: platforms, InsecureRegistries: r.InsecureRegistries}
	in := PlanInput{Build: b, Platforms: platforms, ManifestList: pl.ManifestList(b), Pods: obs.pods, Now: now}
	plan, result, err := r.act(ctx, pl, in, Decide(in), s)
	if err != nil {
		return changedMeanwhile(ctx, err)
	}
	res, err := r.write(ctx, b, platforms, plan, now)
	if result.RequeueAfter > 0 && (res.RequeueAfter == 0 || result.RequeueAfter < res.RequeueAfter) {
		res = result
	}
	return res, err
}

// firstResolution resolves a Build's platforms. A multi-platform Build's
// platforms go into its status before any pod exists, so a user sees what
// will be built and a restarted controller builds the same ones; its pods
// come next reconcile (done). A classic build is annotated with its pod
// and goes on at once.
func (r *Reconciler) firstResolution(ctx context.Context, b *buildv1.Build, now metav1.Time, s *consistency.Session) (ctrl.Result, bool, error) {
	if b.Status.Cancelled {
		res, err := r.write(ctx, b, nil, Plan{Phase: buildv1.BuildPhaseCancelled, Reason: buildv1.StatusReasonCancelledBuild,
			Message: "The build was cancelled by the user."}, now)
		return res, true, err
	}
	res, err := r.resolve(ctx, b)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	if !res.Classic() {
		plan := ResolutionPlan(b, res, now)
		if res.Failure == nil {
			pf, ended, err := r.preflight(ctx, b, res)
			if err != nil || !ended {
				// Not ended: the check's end enqueues the Build.
				return ctrl.Result{}, true, err
			}
			ApplyPreflight(&plan, pf, now)
		}
		result, err := r.write(ctx, b, res.Platforms, plan, now)
		return result, true, err
	}
	if err := r.annotate(ctx, b, nil); err != nil {
		result, err := changedMeanwhile(ctx, err)
		return result, true, err
	}
	s.Wrote()
	return ctrl.Result{}, false, nil
}

// observation is what a running Build's decision looks at.
type observation struct {
	// build is the Build, read from the apiserver when the cache may not
	// show what its pods did (NeedsFreshBuild).
	build *buildv1.Build
	// pods are the Build's pods by name: the cache's, plus those the
	// Build's status says exist that the cache does not show yet.
	pods map[string]*corev1.Pod
}

// observe reads the Build's pods, and the Build again when a decision
// depends on an entry the cache may not show yet. It returns nil when the
// Build ended meanwhile.
func (r *Reconciler) observe(ctx context.Context, b *buildv1.Build, platforms []string) (*observation, error) {
	pods, err := r.pods(ctx, b)
	if err != nil {
		return nil, err
	}
	if NeedsFreshBuild(b, platforms, pods) {
		fresh := &buildv1.Build{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(b), fresh); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		if fresh.Status.Phase.IsTerminal() {
			return nil, nil
		}
		b = fresh
	}
	for _, name := range ExpectedPods(b, platforms, pods) {
		pod := &corev1.Pod{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: name}, pod)
		switch {
		case err == nil:
			if ref := metav1.GetControllerOf(pod); ref != nil && ref.UID == b.UID {
				pods[name] = pod
			}
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading pod %s: %w", name, err)
		}
	}
	return &observation{build: b, pods: pods}, nil
}

// act carries out the plan's pod changes and returns the plan to write:
// the pods it asks for are created (startPods), then those it stops are
// deleted. A conflict error means the Build changed meanwhile.
func (r *Reconciler) act(ctx context.Context, pl PodPlan, in PlanInput, plan Plan, s *consistency.Session) (Plan, ctrl.Result, error) {
	var result ctrl.Result
	if len(plan.CreatePods) > 0 || plan.CreateManifestList {
		var err error
		if plan, result, err = r.startPods(ctx, pl, in, plan, s); err != nil {
			return plan, ctrl.Result{}, err
		}
	}
	b := in.Build
	for _, name := range plan.DeletePods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: b.Namespace, Name: name}}
		if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &in.Pods[name].UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return plan, ctrl.Result{}, fmt.Errorf("deleting pod %s: %w", name, err)
		}
	}
	return plan, result, nil
}

// startPods creates the pods plan asks for once the push secret exists,
// and decides again with what the creates returned (the pods made, the
// ones refused for good). Without the secret no pod is made, and the
// Build looks again after missingSecretRetry.
func (r *Reconciler) startPods(ctx context.Context, pl PodPlan, in PlanInput, plan Plan, s *consistency.Session) (Plan, ctrl.Result, error) {
	missing, err := r.missingPushSecret(ctx, in.Build)
	if err != nil {
		return plan, ctrl.Result{}, err
	}
	if missing != "" {
		return awaitPushSecret(in, plan, missing), ctrl.Result{RequeueAfter: missingSecretRetry}, nil
	}
	created, createErrs, err := r.createPodsAnnotating(ctx, pl, in.Build, plan, s)
	if err != nil {
		// A conflict: the pods exist (or come next time); the status
		// waits for the Build's newer version.
		return plan, ctrl.Result{}, err
	}
	for _, p := range created {
		in.Pods[p.Name] = p
	}
	in.CreateErrors = createErrs
	return Decide(in), ctrl.Result{}, nil
}

// awaitPushSecret is plan without its creates, saying the Build waits for
// its push secret (missing says which): a Build with no pod yet stays New.
func awaitPushSecret(in PlanInput, plan Plan, missing string) Plan {
	plan.CreatePods, plan.CreateManifestList = nil, false
	if len(in.Pods) == 0 {
		plan.Phase = forward(in.Build.Status.Phase, buildv1.BuildPhaseNew)
	}
	plan.Reason, plan.Message = buildv1.StatusReasonMissingPushSecret, missing
	return plan
}

// createPodsAnnotating creates the plan's pods (createPods) while, at the
// same time, it annotates b with them: the two round trips overlap. b then
// has the annotated version, which s notes.
func (r *Reconciler) createPodsAnnotating(ctx context.Context, pl PodPlan, b *buildv1.Build, plan Plan, s *consistency.Session) ([]*corev1.Pod, map[string]CreateError, error) {
	annotated := b.DeepCopy()
	annotateErr := make(chan error, 1)
	go func() { annotateErr <- r.annotate(ctx, annotated, pl.Platforms) }()
	created, createErrs, err := r.createPods(ctx, b, pl, plan)
	if aerr := <-annotateErr; err == nil {
		err = aerr
	}
	if err != nil {
		return nil, nil, err
	}
	b.Annotations, b.ResourceVersion = annotated.Annotations, annotated.ResourceVersion
	s.Wrote()
	return created, createErrs, nil
}

// cleanup creates the manifest-list pod that removes the per-platform tags
// of a multi-platform Build that ended without a manifest list, once every
// platform pod has ended (see Cleanup); the manifest-list pod started with
// the platform pods is deleted first. The cache says when that may be; a
// read from the apiserver confirms it, since a pod created in the reconcile
// that failed the Build may not be in the cache yet.
func (r *Reconciler) cleanup(ctx context.Context, b *buildv1.Build) (ctrl.Result, error) {
	platforms, _ := resolvedPlatforms(b)
	pl := PodPlan{Config: r.Config, Platforms: platforms, InsecureRegistries: r.InsecureRegistries}
	if !NeedsCleanup(b, pl.ManifestList(b)) {
		return ctrl.Result{}, nil
	}
	pods, err := r.pods(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	c := DecideCleanup(b, platforms, pods)
	if c.Create {
		if pods, err = r.livePods(ctx, b); err != nil {
			return ctrl.Result{}, err
		}
		c = DecideCleanup(b, platforms, pods)
	}
	if c.Replace != nil {
		// It removes nothing from a Build that ended without a manifest
		// list: the pod that does takes its name once it is gone.
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Replace.Namespace, Name: c.Replace.Name}}
		if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &c.Replace.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return ctrl.Result{}, fmt.Errorf("deleting pod %s: %w", c.Replace.Name, err)
		}
	}
	if !c.Create {
		if len(c.WaitingFor) == 0 {
			return ctrl.Result{}, nil
		}
		msg := fmt.Sprintf("The per-platform tags are removed once the pods %s have ended.", strings.Join(c.WaitingFor, ", "))
		return ctrl.Result{}, r.setTagsCondition(ctx, b, metav1.ConditionFalse, buildv1.ReasonWaitingForBuildPods, msg, "")
	}
	settings, err := r.registrySettings(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	pl.ClusterRegistryCAs = RegistryCAs(settings)
	pod, err := pl.RemoveTagsPod(b)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("making the manifest-list pod: %w", err)
	}
	created, permanent, err := r.createPod(ctx, b, pod)
	if err != nil {
		return ctrl.Result{}, err
	} else if permanent.Message != "" {
		// Nothing to retry: the tags stay, and the condition says why.
		return ctrl.Result{}, r.setTagsCondition(ctx, b, metav1.ConditionFalse, buildv1.ReasonRemovingPlatformTagsFailed,
			"The pod that removes the per-platform tags cannot be created: "+permanent.Message, "")
	}
	r.event(b, corev1.EventTypeNormal, buildv1.EventReasonRemovingPlatformTags,
		"Every platform pod of %s/%s has ended; pod %s removes the per-platform tags", b.Namespace, b.Name, pod.Name)
	// The pod records its outcome itself once its UID is in status.podUID.
	return ctrl.Result{}, r.setTagsCondition(ctx, b, metav1.ConditionUnknown, buildv1.ReasonRemovingPlatformTags,
		fmt.Sprintf("Pod %s removes the per-platform tags.", pod.Name), string(created.UID))
}

// setTagsCondition applies the PlatformTagsRemoved condition, when it
// changed, under a field manager of its own: the rest of an ended Build's
// status stays as it is.
func (r *Reconciler) setTagsCondition(ctx context.Context, b *buildv1.Build, status metav1.ConditionStatus, reason, msg, podUID string) error {
	ac := TagsConditionApply(b, status, reason, msg, podUID, metav1.NewTime(r.Now()))
	if ac == nil {
		return nil
	}
	err := r.Client.Status().Apply(ctx, ac, client.FieldOwner(CleanupFieldManager), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("writing the build's %s condition: %w", buildv1.BuildConditionPlatformTagsRemoved, err)
	}
	return nil
}

// livePods returns the Build's pods by name, read from the apiserver.
func (r *Reconciler) livePods(ctx context.Context, b *buildv1.Build) (map[string]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.APIReader.List(ctx, &list, client.InNamespace(b.Namespace),
		client.MatchingLabels{buildv1.BuildLabel: buildv1.LabelValue(b.Name)}); err != nil {
		return nil, fmt.Errorf("listing the build's pods: %w", err)
	}
	pods := make(map[string]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == b.UID {
			pods[list.Items[i].Name] = &list.Items[i]
		}
	}
	return pods, nil
}

// changedMeanwhile is the result of a reconcile that ends on err: none when
// err is a conflict (the Build changed since it was read; its newer version
// is on its way through the informer and is handled afresh), else err.
func changedMeanwhile(ctx context.Context, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		log.FromContext(ctx).V(1).Info("build changed while reconciling; waiting for its newer version", "error", err.Error())
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// resolvedPlatforms returns the platforms a Build was resolved to: the keys
// of its status.platforms, or none for a classic build (whose pod-name
// annotation names its single pod). resolved is false before the first
// resolution.
func resolvedPlatforms(b *buildv1.Build) (platforms []string, resolved bool) {
	if len(b.Status.Platforms) > 0 {
		for _, e := range b.Status.Platforms {
			platforms = append(platforms, e.Platform)
		}
		return platforms, true
	}
	return nil, b.Annotations[buildv1.BuildPodNameAnnotation] == buildv1.ClassicPodName(b.Name)
}

// resolve runs platform resolution on the cluster's nodes: one
// representative per group of alike nodes, whatever the cluster's size.
func (r *Reconciler) resolve(_ context.Context, b *buildv1.Build) (Resolution, error) {
	sel := NodeSelector(b, r.Config)
	return Resolve(ResolveInput{
		Spec:              b.Spec.Platforms,
		AllowedToFail:     b.Spec.PlatformsAllowedToFail,
		Defaults:          r.Config.BuildDefaults.Platforms,
		Overrides:         r.Config.BuildOverrides.Platforms,
		BuildNodeSelector: b.Spec.NodeSelector,
		NodeSelector:      sel,
		Tolerations:       Tolerations(r.Config),
		ArchNodeSelector:  ptr.Deref(r.Config.BuildOverrides.ArchNodeSelector, true),
		Nodes:             r.Nodes.Nodes(sel),
		Emulation:         r.Config.Emulation.Platforms,
		EmulationRequest:  b.Annotations[buildv1.EmulationAnnotation],
	}), nil
}

// annotate sets the Build's pod-selector and pod-name annotations (for a
// classic build before its pod exists; for a multi-platform build with its
// pods).
func (r *Reconciler) annotate(ctx context.Context, b *buildv1.Build, platforms []string) error {
	podName := buildv1.ClassicPodName(b.Name)
	switch {
	case PodPlan{Config: r.Config, Platforms: platforms, InsecureRegistries: r.InsecureRegistries}.ManifestList(b):
		podName = buildv1.ManifestListPodName(b.Name)
	case len(platforms) > 0:
		podName = buildv1.PlatformPodName(b.Name, platforms[0])
	}
	want := map[string]string{buildv1.PodSelectorAnnotation: buildv1.PodSelector(b.Name), buildv1.BuildPodNameAnnotation: podName}
	if b.Annotations[buildv1.PodSelectorAnnotation] == want[buildv1.PodSelectorAnnotation] &&
		b.Annotations[buildv1.BuildPodNameAnnotation] == podName {
		return nil
	}
	// With the version the decision was made on: when the Build changed
	// since, the patch conflicts rather than let a status written next
	// pass the version check on a stale read.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": want, "resourceVersion": b.ResourceVersion}})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, b, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
		return fmt.Errorf("annotating the build with its pods: %w", err)
	}
	return nil
}

// pods returns the Build's pods by name, from the cache.
func (r *Reconciler) pods(ctx context.Context, b *buildv1.Build) (map[string]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(b.Namespace), client.MatchingFields{podOwnerIndex: string(b.UID)}); err != nil {
		return nil, fmt.Errorf("listing the build's pods: %w", err)
	}
	pods := make(map[string]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		pods[list.Items[i].Name] = &list.Items[i]
	}
	return pods, nil
}

// missingPushSecret says why the build cannot push, or "" when its push
// secret exists (or it has none). Secrets are read from the apiserver, not
// cached: the controller has no business holding every Secret.
func (r *Reconciler) missingPushSecret(ctx context.Context, b *buildv1.Build) (string, error) {
	ref := b.Spec.Output.PushSecret
	if ref == nil || b.Spec.Output.To == nil {
		return "", nil
	}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: ref.Name}, &corev1.Secret{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("spec.output.pushSecret names Secret %q, which does not exist in namespace %s; the build waits for it.", ref.Name, b.Namespace), nil
	case err != nil:
		return "", fmt.Errorf("reading the push secret: %w", err)
	}
	return "", nil
}

// createPods creates the pods the plan asks for, at once. AlreadyExists is
// success when the pod is the Build's: a controller restarted mid-fan-out
// makes no second pod. Pods the apiserver refuses for good (invalid,
// forbidden) come back in createErrs; any other error is returned for a
// retry.
func (r *Reconciler) createPods(ctx context.Context, b *buildv1.Build, pl PodPlan, plan Plan) (created []*corev1.Pod, createErrs map[string]CreateError, err error) {
	if usesAccountSecrets(b) {
		if pl.AccountPullSecrets, err = r.accountPullSecrets(ctx, b); err != nil {
			return nil, nil, err
		}
	}
	if len(plan.CreatePods) > 0 || plan.CreateManifestList {
		settings, err := r.registrySettings(ctx)
		if err != nil {
			return nil, nil, err
		}
		if len(plan.CreatePods) > 0 {
			if pl.RegistriesConf, err = RegistriesConf(settings); err != nil {
				return nil, nil, fmt.Errorf("the registry configuration: %w", err)
			}
			if settings != nil {
				pl.AllowedRegistries = settings.Conf.Allowed
			}
		}
		pl.ClusterRegistryCAs = RegistryCAs(settings)
	}
	var specs []*corev1.Pod
	for _, p := range plan.CreatePods {
		pod, err := pl.BuildPod(b, p)
		if err != nil {
			return nil, nil, fmt.Errorf("making the pod of %q: %w", p, err)
		}
		specs = append(specs, pod)
	}
	if plan.CreateManifestList {
		pod, err := pl.ManifestListPod(b)
		if err != nil {
			return nil, nil, fmt.Errorf("making the manifest-list pod: %w", err)
		}
		specs = append(specs, pod)
	}
	// Build pods that run as the builder service account need it, and its
	// RoleBinding, in their namespace: created here, as OpenShift's
	// controllers do, so that no one binds roles by hand.
	for _, pod := range specs {
		if pod.Spec.ServiceAccountName == r.Config.BuilderServiceAccount {
			if err := r.accounts.ensure(ctx, r.Client, b.Namespace, pod.Spec.ServiceAccountName); err != nil {
				return nil, nil, err
			}
			break
		}
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	createErrs = map[string]CreateError{}
	for _, pod := range specs {
		wg.Go(func() {
			got, permanent, err := r.createPod(ctx, b, pod)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case permanent.Message != "":
				createErrs[pod.Name] = permanent
			case err != nil:
				errs = append(errs, err)
			default:
				created = append(created, got)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	slices.SortFunc(created, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return created, createErrs, nil
}

// accountPullSecrets are the names of the image pull secrets of the
// service account b's pods run as (none when it does not exist yet: the
// controller creates the builder account without any). Only the account
// is read, never a Secret: the pods mount them.
func (r *Reconciler) accountPullSecrets(ctx context.Context, b *buildv1.Build) ([]string, error) {
	name := b.Spec.ServiceAccount
	if name == "" {
		name = r.Config.BuilderServiceAccount
	}
	sa := &corev1.ServiceAccount{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: name}, sa); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the image pull secrets of service account %s/%s: %w", b.Namespace, name, err)
	}
	var names []string
	for _, s := range sa.ImagePullSecrets {
		if s.Name != "" && !slices.Contains(names, s.Name) {
			names = append(names, s.Name)
		}
	}
	return names, nil
}

func (r *Reconciler) createPod(ctx context.Context, b *buildv1.Build, pod *corev1.Pod) (*corev1.Pod, CreateError, error) {
	err := r.Client.Create(ctx, pod, client.FieldOwner(FieldManager))
	switch {
	case err == nil:
		if escape := unfitNodesEscape(pod, UnfitNodeRequirement(r.Config)); escape != "" {
			msg, err := r.refuseUnfit(ctx, pod, escape)
			return nil, CreateError{Message: msg}, err
		}
		return pod, CreateError{}, nil
	case apierrors.IsAlreadyExists(err):
		existing := &corev1.Pod{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pod), existing); err != nil {
			return nil, CreateError{}, fmt.Errorf("reading existing pod %s: %w", pod.Name, err)
		}
		if ref := metav1.GetControllerOf(existing); ref == nil || ref.UID != b.UID {
			return nil, CreateError{Message: fmt.Sprintf("a pod named %s already exists and does not belong to this build (%s)", pod.Name, buildv1.StatusReasonBuildPodExists)}, nil
		}
		return existing, CreateError{}, nil
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota"):
		return nil, CreateError{}, fmt.Errorf("creating pod %s: %w", pod.Name, err)
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "serviceaccount") && pod.Spec.ServiceAccountName == r.Config.BuilderServiceAccount:
		// The builder service account was deleted since it was ensured:
		// create it again on the next attempt.
		r.accounts.forget(pod.Namespace)
		return nil, CreateError{}, fmt.Errorf("creating pod %s: %w", pod.Name, err)
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
		return nil, RefusedCreate(pod.Namespace, err), nil
	default:
		return nil, CreateError{}, fmt.Errorf("creating pod %s: %w", pod.Name, err)
	}
}

// refuseUnfit deletes a pod that admission left able to run on a node
// build.unfitNodes marks, and returns the permanent failure that says so
// (or the error of the delete, retried).
func (r *Reconciler) refuseUnfit(ctx context.Context, pod *corev1.Pod, escape string) (string, error) {
	if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("deleting pod %s, which may run on a node unfit for builds: %w", pod.Name, err)
	}
	u := r.Config.UnfitNodes
	return fmt.Sprintf("%s, so it could run on a node labelled %s, which build.unfitNodes marks unfit for builds: "+
		"the pod was deleted (find the scheduling policy or webhook that changes build pods' node affinity)", escape, u.LabelKey), nil
}

// write applies the status the plan leads to, if it changed, then records
// events and metrics: only after the write succeeded, so a retried
// reconcile never reports a transition twice.
func (r *Reconciler) write(ctx context.Context, b *buildv1.Build, platforms []string, plan Plan, now metav1.Time) (ctrl.Result, error) {
	next := NextStatus(b, platforms, plan, now)
	if equality.Semantic.DeepEqual(next, b.Status) {
		return ctrl.Result{}, nil
	}
	key := client.ObjectKeyFromObject(b)
	if progressOnly(b.Status, next) && len(plan.Events) == 0 {
		if wait := r.progress.wait(key, now.Time); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	body, err := StatusApply(b, next, plan)
	if err != nil {
		return ctrl.Result{}, err
	}
	err = r.Client.Status().Apply(ctx, body, client.FieldOwner(FieldManager), client.ForceOwnership)
	if apierrors.IsConflict(err) {
		// The Build changed since it was read (a builder wrote its entry):
		// its watch event brings it back with the change.
		log.FromContext(ctx).V(1).Info("build changed while reconciling; retrying", "error", err.Error())
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("writing the build's status: %w", err)
	}
	r.progress.wrote(key, now.Time, next.Phase.IsTerminal())
	if m := body.ObjectMetaApplyConfiguration; m != nil && m.ResourceVersion != nil {
		b.ResourceVersion = *m.ResourceVersion
	}
	r.recordEmulated(b, next)
	for _, e := range plan.Events {
		r.event(b, e.Type, e.Reason, "%s", e.Message)
	}
	r.recordTransition(b, b.Status.Phase, next)
	return ctrl.Result{}, nil
}

// recordEmulated records a PlatformEmulated event for each platform the
// write has just set to be built under emulation.
func (r *Reconciler) recordEmulated(b *buildv1.Build, next buildv1.BuildStatus) {
	for _, e := range next.Platforms {
		if e.EmulatedOn != "" && entryOf(b, e.Platform).EmulatedOn == "" {
			r.event(b, corev1.EventTypeNormal, buildv1.EventReasonPlatformEmulated,
				"No Ready schedulable node of %s can build it for %s/%s: its pod builds it under emulation on a %s node", e.Platform, b.Namespace, b.Name, e.EmulatedOn)
		}
	}
}

// recordTransition emits OpenShift's build events and observes the
// platforms' durations when the build ends.
func (r *Reconciler) recordTransition(b *buildv1.Build, from buildv1.BuildPhase, next buildv1.BuildStatus) {
	to := next.Phase
	if from == to {
		return
	}
	note := next.Message
	switch to {
	case buildv1.BuildPhaseRunning:
		r.event(b, corev1.EventTypeNormal, buildv1.EventReasonBuildStarted, "Build %s/%s is now running", b.Namespace, b.Name)
	case buildv1.BuildPhaseComplete:
		r.event(b, corev1.EventTypeNormal, buildv1.EventReasonBuildCompleted, "Build %s/%s completed successfully", b.Namespace, b.Name)
	case buildv1.BuildPhaseFailed, buildv1.BuildPhaseError:
		r.event(b, corev1.EventTypeWarning, buildv1.EventReasonBuildFailed, "Build %s/%s failed (%s): %s", b.Namespace, b.Name, next.Reason, note)
	case buildv1.BuildPhaseCancelled:
		r.event(b, corev1.EventTypeNormal, buildv1.EventReasonBuildCancelled, "Build %s/%s has been cancelled", b.Namespace, b.Name)
	}
	if to.IsTerminal() {
		r.Metrics.observeEnded(next)
	}
}

func (r *Reconciler) event(b *buildv1.Build, typ, reason, format string, args ...any) {
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(b, nil, typ, reason, "Build", format, args...)
}
