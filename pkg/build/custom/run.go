package custom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	archwaybuildv1alpha1 "github.com/archway-build/archway/pkg/apis/archwaybuild/v1alpha1"
	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/build/builder/report"
	"github.com/archway-build/archway/pkg/build/controller"
)

// Options are what Run needs besides the Build.
type Options struct {
	// Kube and Dynamic reach the apiserver as the custom pod's service
	// account.
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Config is the build configuration the pods are made with
	// (defaulted; BuilderImage set).
	Config *configv1alpha1.BuildControllerConfig
	// InsecureRegistries are passed to the builders.
	InsecureRegistries []string
	// RegistriesConf and AllowedRegistries are the cluster's registry
	// configuration (ClusterRegistries), handed to every platform's pod
	// as build-controller hands its own.
	RegistriesConf    string
	AllowedRegistries []string
	// RegistryCAs is the ConfigMap of registry CAs OpenShift mounted into
	// the custom pod (PodRegistryCAs), mounted into every platform's pod
	// and the manifest-list pod as OpenShift mounts it. Nil: none.
	RegistryCAs *corev1.ConfigMapVolumeSource
	// Bases reads base images' platforms for the check build-controller
	// makes before the fan-out (nil: no check), with the credentials of
	// PullSecret (the strategy's pull secret as OpenShift mounts it: its
	// type and data; empty: anonymous).
	Bases      controller.BaseInspector
	PullSecret PullSecret
	// PlatformsFrom says where the Build's spec.platforms came from
	// (PlatformsFrom), for the log; "" names spec.platforms.
	PlatformsFrom string
	// Out is the custom pod's log: every pod's lines, prefixed.
	Out io.Writer
	// PodName is the custom pod's own name ("": the name OpenShift gives
	// it, <build>-build, which is never taken for a platform's pod).
	PodName string
	// StopGrace bounds what Run does once ctx is done (the pod is being
	// deleted): stop the platforms and start the removal of their tags.
	// Default 20s, within a pod's default grace period of 30s.
	StopGrace time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Result is how a Build ended.
type Result struct {
	Phase   buildv1.BuildPhase
	Reason  buildv1.StatusReason
	Message string
}

// driver runs one Build.
type driver struct {
	o         Options
	ownerUID  types.UID
	name, ns  string
	platforms []string
	pl        controller.PodPlan
	mabs      dynamic.ResourceInterface
	logs      *logStreams
}

// Run runs b, the archway Build DockerBuild made of OpenShift's Build (whose
// UID b keeps), as build-controller runs an archway Build, with its status
// in a MultiArchBuild; it returns how the Build ended. When ctx is done
// before the end, the build is cancelled: its pods are stopped and, once
// they have ended, the pod that removes the per-platform tags is started.
func Run(ctx context.Context, b *buildv1.Build, o Options) (Result, error) {
	if o.StopGrace == 0 {
		o.StopGrace = 20 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PodName == "" {
		o.PodName = buildv1.ClassicPodName(b.Name)
	}
	d := &driver{
		o: o, ownerUID: b.UID, name: b.Name, ns: b.Namespace,
		pl: controller.PodPlan{
			Config: o.Config, InsecureRegistries: o.InsecureRegistries,
			RegistriesConf: o.RegistriesConf, AllowedRegistries: o.AllowedRegistries,
			RegistryCAs: o.RegistryCAs,
		},
		mabs: o.Dynamic.Resource(archwaybuildv1alpha1.Resource).Namespace(b.Namespace),
		logs: newLogStreams(o.Kube, b.Namespace, o.Out),
	}
	defer d.logs.wait(5 * time.Second)
	// Once ctx is done, the work goes on with a context of its own for at
	// most StopGrace: cancelling the platforms is the work then.
	work, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
			time.AfterFunc(o.StopGrace, stop)
		case <-work.Done():
		}
	}()
	res, err := d.start(work, b)
	if err != nil || res != nil {
		return derefResult(res), err
	}
	return d.loop(ctx, work)
}

func derefResult(r *Result) Result {
	if r == nil {
		return Result{}
	}
	return *r
}

// start resolves the platforms, creates the MultiArchBuild and writes the
// resolution into it. A Build that fails at resolution returns its Result.
func (d *driver) start(ctx context.Context, b *buildv1.Build) (*Result, error) {
	nodes, err := d.o.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the nodes to resolve the platforms (the builder account needs the ClusterRole archway-custom-builder-nodes): %w", err)
	}
	groups := controller.NewNodeGroups()
	for i := range nodes.Items {
		groups.Set(&nodes.Items[i])
	}
	resolve := func(spec []string) controller.Resolution {
		sel := controller.NodeSelector(b, d.o.Config)
		return controller.Resolve(controller.ResolveInput{
			Spec:              spec,
			AllowedToFail:     b.Spec.PlatformsAllowedToFail,
			Defaults:          d.o.Config.BuildDefaults.Platforms,
			Overrides:         d.o.Config.BuildOverrides.Platforms,
			BuildNodeSelector: b.Spec.NodeSelector,
			NodeSelector:      sel,
			Tolerations:       controller.Tolerations(d.o.Config),
			ArchNodeSelector:  ptr.Deref(d.o.Config.BuildOverrides.ArchNodeSelector, true),
			Nodes:             groups.Nodes(sel),
			Emulation:         d.o.Config.Emulation.Platforms,
			EmulationRequest:  b.Annotations[buildv1.EmulationAnnotation],
		})
	}
	res := resolve(b.Spec.Platforms)
	if res.Classic() {
		// One architecture (or none) among the nodes: build for the one
		// this pod runs on, as one platform, so the build runs as every
		// other custom build does.
		res = resolve([]string{"linux/" + runtime.GOARCH})
	}
	d.platforms, d.pl.Platforms = res.Platforms, res.Platforms
	b.Spec.Platforms = res.Platforms
	b.Annotations = map[string]string{
		buildv1.PodSelectorAnnotation:  buildv1.PodSelector(b.Name),
		buildv1.BuildPodNameAnnotation: buildv1.PlatformPodName(b.Name, res.Platforms[0]),
	}
	if d.pl.ManifestList(b) {
		b.Annotations[buildv1.BuildPodNameAnnotation] = buildv1.ManifestListPodName(b.Name)
	}
	cur, err := d.create(ctx, b)
	if err != nil {
		return nil, err
	}
	from := string(res.Source)
	if res.Source == controller.SourceSpec && d.o.PlatformsFrom != "" {
		from = d.o.PlatformsFrom
	}
	fmt.Fprintf(d.o.Out, "Building %s/%s for %s (platforms from %s); status in multiarchbuild/%s\n",
		b.Namespace, b.Name, strings.Join(d.platforms, ", "), from, b.Name)
	failure := res.Failure
	if len(cur.Status.Platforms) == 0 {
		now := metav1.NewTime(d.o.Now())
		plan := controller.ResolutionPlan(cur, res, now)
		if failure == nil {
			pf := d.preflight(ctx, cur, res)
			controller.ApplyPreflight(&plan, pf, now)
			for _, e := range plan.Events {
				fmt.Fprintf(d.o.Out, "%s: %s\n", e.Reason, e.Message)
			}
			failure = pf.Failure
		}
		if _, err = d.write(ctx, cur, plan, now); err != nil {
			return nil, err
		}
	}
	if f := failure; f != nil {
		return &Result{Phase: f.Phase, Reason: f.Reason, Message: f.Message}, nil
	}
	return nil, nil
}

// PullSecret is a docker config secret's type and data.
type PullSecret struct {
	Type string
	Data []byte
}

// maxBaseImages bounds the base images checked before the fan-out, as
// build-controller bounds them; baseInspectionTimeout bounds the check.
const (
	maxBaseImages         = 64
	baseInspectionTimeout = 15 * time.Second
)

// preflight checks, as build-controller does before the fan-out, that the
// base images known before any pod (controller.BaseImages) have every
// platform a node can build, and decides with controller.DecidePreflight:
// a platform a base lacks fails with BaseImagePlatformNotFound and gets
// no pod, and fails the Build unless it is allowed to fail. A base that
// cannot be inspected decides nothing (each pod checks its own).
func (d *driver) preflight(ctx context.Context, b *buildv1.Build, res controller.Resolution) controller.Preflight {
	if d.o.Bases == nil {
		return controller.Preflight{}
	}
	refs, known := controller.BaseImages(b)
	if !known {
		return controller.Preflight{}
	}
	if len(refs) > maxBaseImages {
		return controller.Preflight{Unchecked: []string{fmt.Sprintf("the build names %d base images, more than the %d checked before the pods", len(refs), maxBaseImages)}}
	}
	ctx, cancel := context.WithTimeout(ctx, baseInspectionTimeout)
	defer cancel()
	checks := make([]controller.BaseCheck, 0, len(refs))
	for _, ref := range refs {
		ps, err := d.o.Bases.BasePlatforms(ctx, ref, d.o.PullSecret.Type, d.o.PullSecret.Data)
		checks = append(checks, controller.BaseCheck{Image: ref, Platforms: ps, Err: err})
	}
	var platforms []string
	for _, p := range res.Platforms {
		if _, noNode := res.NoNode[p]; !noNode {
			platforms = append(platforms, p)
		}
	}
	return controller.DecidePreflight(platforms, b.Spec.PlatformsAllowedToFail, checks)
}

// create creates the Build's MultiArchBuild, owned by the Build, or reads
// the one that exists (a second run of the same pod).
func (d *driver) create(ctx context.Context, b *buildv1.Build) (*buildv1.Build, error) {
	mab := &archwaybuildv1alpha1.MultiArchBuild{
		TypeMeta: metav1.TypeMeta{APIVersion: archwaybuildv1alpha1.GroupVersion.String(), Kind: "MultiArchBuild"},
		ObjectMeta: metav1.ObjectMeta{
			Name: b.Name, Namespace: b.Namespace,
			Labels:      map[string]string{buildv1.BuildLabel: buildv1.LabelValue(b.Name)},
			Annotations: b.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: buildv1.GroupVersion.String(), Kind: "Build", Name: b.Name, UID: b.UID,
			}},
		},
		Spec: b.Spec,
	}
	obj, err := kruntime.DefaultUnstructuredConverter.ToUnstructured(mab)
	if err != nil {
		return nil, err
	}
	u, err := d.mabs.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: controller.FieldManager})
	if apierrors.IsAlreadyExists(err) {
		return d.read(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("creating multiarchbuild %s/%s: %w", b.Namespace, b.Name, err)
	}
	return d.fromObject(u)
}

// read reads the MultiArchBuild as the Build the controller's functions
// decide on: its spec and status, the OpenShift Build's UID (the pods'
// owner).
func (d *driver) read(ctx context.Context) (*buildv1.Build, error) {
	u, err := d.mabs.Get(ctx, d.name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading multiarchbuild %s/%s: %w", d.ns, d.name, err)
	}
	return d.fromObject(u)
}

func (d *driver) fromObject(u *unstructured.Unstructured) (*buildv1.Build, error) {
	owned := slices.ContainsFunc(u.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == d.ownerUID })
	if !owned {
		return nil, fmt.Errorf("multiarchbuild %s/%s belongs to another Build of that name", d.ns, d.name)
	}
	b, err := report.BuildFromUnstructured(u)
	if err != nil {
		return nil, err
	}
	b.UID = d.ownerUID
	if len(d.platforms) == 0 {
		for _, e := range b.Status.Platforms {
			d.platforms = append(d.platforms, e.Platform)
		}
		d.pl.Platforms = d.platforms
	}
	return b, nil
}

// write applies the status plan leads to, as build-controller does
// (controller.NextStatus, controller.StatusApply), to the MultiArchBuild.
// It returns the Build as written, or as read again after a conflict.
func (d *driver) write(ctx context.Context, b *buildv1.Build, plan controller.Plan, now metav1.Time) (*buildv1.Build, error) {
	next := controller.NextStatus(b, d.platforms, plan, now)
	if equality.Semantic.DeepEqual(next, b.Status) {
		return b, nil
	}
	ac, err := controller.StatusApply(b, next, plan)
	if err != nil {
		return nil, err
	}
	return d.apply(ctx, ac, controller.FieldManager)
}

// apply server-side applies an apply configuration of a Build's status to
// the MultiArchBuild under manager.
func (d *driver) apply(ctx context.Context, ac any, manager string) (*buildv1.Build, error) {
	data, err := json.Marshal(ac)
	if err != nil {
		return nil, err
	}
	obj := map[string]any{}
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(archwaybuildv1alpha1.GroupVersion.String())
	u.SetKind("MultiArchBuild")
	got, err := d.mabs.ApplyStatus(ctx, d.name, u, metav1.ApplyOptions{FieldManager: manager, Force: true})
	if apierrors.IsConflict(err) {
		return d.read(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("writing the status of multiarchbuild %s/%s: %w", d.ns, d.name, err)
	}
	return d.fromObject(got)
}

// pods returns the Build's pods by name, but the custom pod itself.
func (d *driver) pods(ctx context.Context) (map[string]*corev1.Pod, error) {
	list, err := d.o.Kube.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: buildv1.BuildLabel + "=" + buildv1.LabelValue(d.name)})
	if err != nil {
		return nil, fmt.Errorf("listing the build's pods: %w", err)
	}
	pods := map[string]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		if ref := metav1.GetControllerOf(p); ref != nil && ref.UID == d.ownerUID && p.Name != d.o.PodName && p.Name != buildv1.ClassicPodName(d.name) {
			pods[p.Name] = p
		}
	}
	return pods, nil
}

// loop decides and acts until the Build ends, then cleans up.
func (d *driver) loop(ctx, work context.Context) (Result, error) {
	changes, stopWatch := d.watch(work)
	defer stopWatch()
	for {
		b, err := d.read(work)
		if err != nil {
			return Result{}, err
		}
		if ctx.Err() != nil && !b.Status.Phase.IsTerminal() {
			b.Status.Cancelled = true
		}
		if b.Status.Phase.IsTerminal() {
			return d.finish(ctx, work, b, changes)
		}
		pods, err := d.pods(work)
		if err != nil {
			return Result{}, err
		}
		now := metav1.NewTime(d.o.Now())
		in := controller.PlanInput{Build: b, Platforms: d.platforms, ManifestList: d.pl.ManifestList(b), Pods: pods, Now: now}
		plan := controller.Decide(in)
		if len(plan.CreatePods) > 0 || plan.CreateManifestList {
			created, errs, err := d.createPods(work, b, plan)
			if err != nil {
				return Result{}, err
			}
			for _, p := range created {
				in.Pods[p.Name] = p
			}
			in.CreateErrors = errs
			plan = controller.Decide(in)
		}
		// Stopped (the custom pod is being deleted), the platforms' pods
		// get a short grace period: every one of them must have ended
		// before the per-platform tags may be removed, within this pod's
		// own grace period.
		var grace *int64
		if ctx.Err() != nil {
			grace = ptr.To(stopPodGrace)
		}
		for _, name := range plan.DeletePods {
			if err := d.deletePod(work, in.Pods[name], grace); err != nil {
				return Result{}, err
			}
		}
		if _, err := d.write(work, b, plan, now); err != nil {
			return Result{}, err
		}
		d.follow(work, b, in.Pods)
		if !plan.Phase.IsTerminal() {
			if err := d.waitForChange(ctx, work, changes); err != nil {
				return Result{}, err
			}
		}
	}
}

// finish follows an ended Build's cleanup (the per-platform tags removed by
// a manifest-list pod once every platform pod has ended, as
// build-controller does) and returns its result. A cancelled run only
// starts the removal: the pod belongs to the Build and outlives this one.
func (d *driver) finish(ctx, work context.Context, b *buildv1.Build, changes <-chan struct{}) (Result, error) {
	res := Result{Phase: b.Status.Phase, Reason: b.Status.Reason, Message: b.Status.Message}
	var waiting string
	for controller.NeedsCleanup(b, d.pl.ManifestList(b)) {
		pods, err := d.pods(work)
		if err != nil {
			return res, err
		}
		d.follow(work, b, pods)
		c := controller.DecideCleanup(b, d.platforms, pods)
		if c.Replace != nil {
			if err := d.deletePod(work, c.Replace, nil); err != nil {
				return res, err
			}
		}
		if c.Create {
			pod, err := d.pl.RemoveTagsPod(b)
			if err != nil {
				return res, err
			}
			created, permanent, err := d.createPod(work, pod)
			if err != nil {
				return res, err
			}
			if permanent.Message != "" {
				fmt.Fprintf(d.o.Out, "The pod that removes the per-platform tags cannot be created: %s\n", permanent.Message)
				break
			}
			if _, err := d.tagsCondition(work, b, created); err != nil {
				return res, err
			}
			fmt.Fprintf(d.o.Out, "Every platform pod has ended: pod %s removes the per-platform tags\n", created.Name)
			if ctx.Err() == nil {
				d.awaitEnd(ctx, work, created.Name, changes)
			}
			break
		}
		if w := strings.Join(c.WaitingFor, ", "); w != waiting {
			waiting = w
			fmt.Fprintf(d.o.Out, "%s The per-platform tags are removed once the pods %s have ended\n", d.o.Now().Format(time.TimeOnly), w)
		}
		if err := d.waitForChange(context.Background(), work, changes); err != nil {
			return res, err
		}
		if b, err = d.read(work); err != nil {
			return res, err
		}
	}
	d.logs.wait(10 * time.Second)
	d.summary(work, res)
	return res, nil
}

// tagsCondition records, as build-controller's cleanup does, the pod that
// removes the per-platform tags: its UID in status.podUID (the pod writes
// its outcome only then) and PlatformTagsRemoved Unknown.
func (d *driver) tagsCondition(ctx context.Context, b *buildv1.Build, pod *corev1.Pod) (*buildv1.Build, error) {
	ac := controller.TagsConditionApply(b, metav1.ConditionUnknown, buildv1.ReasonRemovingPlatformTags,
		fmt.Sprintf("Pod %s removes the per-platform tags.", pod.Name), string(pod.UID), metav1.NewTime(d.o.Now()))
	if ac == nil {
		return b, nil
	}
	return d.apply(ctx, ac, controller.CleanupFieldManager)
}

// awaitEnd waits until the pod has ended or is gone, following its log.
func (d *driver) awaitEnd(ctx, work context.Context, name string, changes <-chan struct{}) {
	for {
		pod, err := d.o.Kube.CoreV1().Pods(d.ns).Get(work, name, metav1.GetOptions{})
		if err != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			return
		}
		d.logs.follow(work, pod, prefixOf(pod))
		if d.waitForChange(ctx, work, changes) != nil || ctx.Err() != nil {
			return
		}
	}
}

// summary prints each platform's outcome and the Build's.
func (d *driver) summary(ctx context.Context, res Result) {
	b, err := d.read(ctx)
	if err != nil {
		fmt.Fprintf(d.o.Out, "%s\n", err)
		return
	}
	for _, p := range d.platforms {
		for _, e := range b.Status.Platforms {
			if e.Platform != p {
				continue
			}
			line := fmt.Sprintf("[%s] %s", p, e.Phase)
			if e.Output != nil && e.Output.ImageDigest != "" {
				line += " " + e.Output.ImageDigest
			}
			if e.Reason != "" {
				line += fmt.Sprintf(" (%s) %s", e.Reason, e.Message)
			}
			fmt.Fprintln(d.o.Out, line)
		}
	}
	line := fmt.Sprintf("Build %s/%s: %s", d.ns, d.name, res.Phase)
	if b.Status.Output.To != nil && b.Status.Output.To.ImageDigest != "" {
		line += ", index " + b.Status.Output.To.ImageDigest
	}
	if res.Reason != "" {
		line += fmt.Sprintf(" (%s) %s", res.Reason, res.Message)
	}
	fmt.Fprintln(d.o.Out, line)
}

// createPods creates the pods plan asks for, as build-controller does
// (controller.PodPlan), each pointed at the MultiArchBuild for its reports.
func (d *driver) createPods(ctx context.Context, b *buildv1.Build, plan controller.Plan) ([]*corev1.Pod, map[string]controller.CreateError, error) {
	var specs []*corev1.Pod
	for _, p := range plan.CreatePods {
		pod, err := d.pl.BuildPod(b, p)
		if err != nil {
			return nil, nil, fmt.Errorf("making the pod of %q: %w", p, err)
		}
		specs = append(specs, pod)
	}
	if plan.CreateManifestList {
		pod, err := d.pl.ManifestListPod(b)
		if err != nil {
			return nil, nil, fmt.Errorf("making the manifest-list pod: %w", err)
		}
		specs = append(specs, pod)
	}
	var created []*corev1.Pod
	errs := map[string]controller.CreateError{}
	for _, pod := range specs {
		got, permanent, err := d.createPod(ctx, pod)
		switch {
		case err != nil:
			return nil, nil, err
		case permanent.Message != "":
			errs[pod.Name] = permanent
		default:
			created = append(created, got)
		}
	}
	return created, errs, nil
}

// createPod creates one pod, pointed at the MultiArchBuild. AlreadyExists
// is success when the pod is the Build's; a refusal for good comes back as
// permanent.
func (d *driver) createPod(ctx context.Context, pod *corev1.Pod) (_ *corev1.Pod, permanent controller.CreateError, _ error) {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		c.Env = append(c.Env, corev1.EnvVar{Name: report.BuildAPIEnv, Value: report.MultiArchBuildAPI})
	}
	got, err := d.o.Kube.CoreV1().Pods(d.ns).Create(ctx, pod, metav1.CreateOptions{FieldManager: controller.FieldManager})
	switch {
	case err == nil:
		return got, controller.CreateError{}, nil
	case apierrors.IsAlreadyExists(err):
		existing, err := d.o.Kube.CoreV1().Pods(d.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return nil, controller.CreateError{}, fmt.Errorf("reading existing pod %s: %w", pod.Name, err)
		}
		if ref := metav1.GetControllerOf(existing); ref == nil || ref.UID != d.ownerUID {
			return nil, controller.CreateError{Message: fmt.Sprintf("a pod named %s already exists and does not belong to this build (%s)", pod.Name, buildv1.StatusReasonBuildPodExists)}, nil
		}
		return existing, controller.CreateError{}, nil
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "exceeded quota"), apierrors.IsBadRequest(err):
		return nil, controller.RefusedCreate(d.ns, err), nil
	default:
		return nil, controller.CreateError{}, fmt.Errorf("creating pod %s: %w", pod.Name, err)
	}
}

// stopPodGrace is the grace period of the pods a stopped custom pod
// deletes: well within StopGrace, so that they have ended (and can push no
// more) before the pod that removes the per-platform tags starts.
const stopPodGrace int64 = 5

// deletePod deletes a pod of the Build, with grace seconds (nil: the pod's).
func (d *driver) deletePod(ctx context.Context, pod *corev1.Pod, grace *int64) error {
	if pod == nil {
		return nil
	}
	err := d.o.Kube.CoreV1().Pods(d.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID}, GracePeriodSeconds: grace})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s: %w", pod.Name, err)
	}
	return nil
}

// follow starts copying the log of every pod whose container has started.
func (d *driver) follow(ctx context.Context, _ *buildv1.Build, pods map[string]*corev1.Pod) {
	for _, name := range sortedNames(pods) {
		d.logs.follow(ctx, pods[name], prefixOf(pods[name]))
	}
}

// prefixOf is the prefix of a pod's log lines: its platform, or its role.
func prefixOf(pod *corev1.Pod) string {
	if p := pod.Annotations[buildv1.PlatformAnnotation]; p != "" {
		return "[" + p + "] "
	}
	if controller.RemovesTags(pod) {
		return "[remove-tags] "
	}
	return "[manifest-list] "
}

func sortedNames(pods map[string]*corev1.Pod) []string {
	names := make([]string, 0, len(pods))
	for n := range pods {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// watch signals every change of the Build's pods or its MultiArchBuild
// (watches started again when the apiserver ends them) until stopped.
func (d *driver) watch(ctx context.Context) (<-chan struct{}, func()) {
	ctx, cancel := context.WithCancel(ctx)
	changes := make(chan struct{}, 1)
	signal := func() {
		select {
		case changes <- struct{}{}:
		default:
		}
	}
	run := func(start func() (watch.Interface, error)) {
		for ctx.Err() == nil {
			w, err := start()
			if err != nil {
				signal()
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				continue
			}
			for range w.ResultChan() {
				signal()
			}
			w.Stop()
			signal()
		}
	}
	go run(func() (watch.Interface, error) {
		return d.o.Kube.CoreV1().Pods(d.ns).Watch(ctx, metav1.ListOptions{LabelSelector: buildv1.BuildLabel + "=" + buildv1.LabelValue(d.name)})
	})
	go run(func() (watch.Interface, error) {
		return d.mabs.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + d.name})
	})
	return changes, cancel
}

// waitForChange waits for a change, for ctx to be done (once: the next
// round cancels the build) or for a resync.
func (d *driver) waitForChange(ctx, work context.Context, changes <-chan struct{}) error {
	select {
	case <-changes:
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	case <-work.Done():
		return errors.New("stopped before the platforms' pods ended")
	}
	return nil
}
