package imagechange

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/imagestream"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/placement/image"
)

// The RBAC this code needs is written, each rule with its reason, in
// manifests/build-controller/rbac/role.yaml (the BuildConfig controller's
// rules, and get on Secrets and ServiceAccounts the Build controller has).

// Event reasons recorded on BuildConfigs.
const (
	// EventReasonImageChangeTriggerFailed: a trigger's image could not be
	// resolved (registry unreachable, credentials refused, no such tag),
	// or a build could not be started; no build was started.
	EventReasonImageChangeTriggerFailed = "ImageChangeTriggerFailed"
	// EventReasonImageChangeTriggered: a new image started a build.
	EventReasonImageChangeTriggered = "ImageChangeTriggered"
)

// Resolver resolves an image reference to the digest of its manifest or
// index with the credentials to try (placement's image.Remote is one).
type Resolver interface {
	Digest(ctx context.Context, name string, auth image.Auth) (digest.Digest, error)
}

// Options tune the controller.
type Options struct {
	// Interval is the time between two polls of a BuildConfig. Required.
	Interval time.Duration
	// BuilderServiceAccount is the service account of builds that name
	// none: its image pull secrets are the credentials of a BuildConfig
	// without a pull secret. Required.
	BuilderServiceAccount string
	// Registry receives the metrics (nil: none registered).
	Registry prometheus.Registerer
	// SkipNameValidation lets a process start the controller more than
	// once (tests).
	SkipNameValidation bool
	// WatchImageStreams watches OpenShift's image streams, so that an
	// ImageStreamTag trigger polls its BuildConfig as soon as its stream
	// changes: set it where the cluster serves them
	// (imagestream.Served, at start). Without it such triggers are read
	// at each poll.
	WatchImageStreams bool
}

// Reconciler polls the ImageChange triggers of BuildConfigs.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Starter   *instantiate.Starter
	Resolver  Resolver
	Recorder  events.EventRecorder
	Metrics   *Metrics
	Options   Options
	Now       func() time.Time
}

// resolveTimeout bounds the resolution of one trigger's image.
const resolveTimeout = 30 * time.Second

// Setup adds the ImageChange trigger controller to mgr: every BuildConfig
// with an ImageChange trigger is polled when it is created or its spec or
// annotations change, and then every opts.Interval.
func Setup(mgr ctrl.Manager, starter *instantiate.Starter, resolver Resolver, opts Options) error {
	if opts.Interval <= 0 {
		return errors.New("imagechange: the poll interval must be positive")
	}
	m := NewMetrics()
	if opts.Registry != nil {
		if err := opts.Registry.Register(m.polls); err != nil {
			return fmt.Errorf("registering the image change trigger metrics: %w", err)
		}
	}
	r := &Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Starter: starter, Resolver: resolver,
		Recorder: mgr.GetEventRecorder("build-controller"), Metrics: m, Options: opts, Now: time.Now,
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("imagechange-trigger").
		// Status writes (lastVersion, the triggers' record) do not poll
		// again: the interval does.
		For(&buildv1.BuildConfig{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, SkipNameValidation: ptr.To(opts.SkipNameValidation)})
	if opts.WatchImageStreams {
		stream := &unstructured.Unstructured{}
		stream.SetGroupVersionKind(schema.GroupVersionKind{Group: imagestream.Group, Version: "v1", Kind: "ImageStream"})
		b = b.Watches(stream, handler.EnqueueRequestsFromMapFunc(r.streamTriggers))
	}
	return b.Complete(r)
}

// streamTriggers are the BuildConfigs of a stream's namespace with an
// ImageStreamTag trigger on one of its tags.
func (r *Reconciler) streamTriggers(ctx context.Context, stream client.Object) []reconcile.Request {
	var list buildv1.BuildConfigList
	if err := r.Client.List(ctx, &list, client.InNamespace(stream.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "listing the BuildConfigs an image stream may trigger", "imagestream", stream.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		for _, t := range Watched(&list.Items[i]) {
			if name, _, err := imagestream.SplitTag(t.Image); err == nil && t.Kind == imagestream.KindImageStreamTag && name == stream.GetName() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
				break
			}
		}
	}
	return out
}

// Reconcile polls one BuildConfig's ImageChange triggers and starts a
// build when Decide says so.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bc := &buildv1.BuildConfig{}
	if err := r.Client.Get(ctx, req.NamespacedName, bc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	triggers := Watched(bc)
	if bc.DeletionTimestamp != nil || len(triggers) == 0 {
		return ctrl.Result{}, nil
	}
	next := ctrl.Result{RequeueAfter: r.Options.Interval}
	if bc.Annotations[buildv1.BuildConfigPausedAnnotation] == "true" {
		r.Metrics.observe(ResultPaused)
		return next, nil
	}
	if bc.Status.LastVersion == 0 && hasConfigChange(bc) {
		// The ConfigChange build comes first; it builds the image as it
		// is, which the next poll records.
		r.Metrics.observe(ResultWaiting)
		return ctrl.Result{RequeueAfter: min(r.Options.Interval, time.Second)}, nil
	}
	var keys *image.Keyring
	var obs []Observation
	failed := false
	for _, t := range triggers {
		switch {
		case t.Paused:
			continue
		case t.Err != nil:
			failed = true
			r.warn(bc, "ImageChange trigger: %v", t.Err)
			continue
		case t.Kind == imagestream.KindImageStreamTag:
			// The tag's current image, read from its stream.
			ref := imagestream.Reference{Field: "imageChange.from", Ref: corev1.ObjectReference{Kind: t.Kind, Name: t.Image}}
			resolved, err := imagestream.Resolve(ctx, r.APIReader, bc.Namespace, []imagestream.Reference{ref})
			var unresolved *imagestream.Unresolved
			switch {
			case errors.As(err, &unresolved) && unresolved.NoImage:
				// Nothing to build yet: the stream's change enqueues the
				// BuildConfig.
				continue
			case errors.As(err, &unresolved):
				failed = true
				r.warn(bc, "ImageChange trigger: %s; no build was started", unresolved.Message)
				continue
			case err != nil:
				return ctrl.Result{}, err
			}
			obs = append(obs, Observation{Trigger: t, ImageID: resolved[ref.Field]})
			continue
		}
		if keys == nil {
			var err error
			if keys, err = r.keyring(ctx, bc); err != nil {
				return ctrl.Result{}, err
			}
		}
		rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
		d, err := r.Resolver.Digest(rctx, t.Image, keys.Lookup(t.Image))
		cancel()
		if err != nil {
			failed = true
			r.warn(bc, "ImageChange trigger: resolving %s: %v; no build was started, the next poll is in %s", t.Image, err, r.Options.Interval)
			continue
		}
		id, err := ImageID(t.Image, d)
		if err != nil {
			failed = true
			r.warn(bc, "ImageChange trigger: %s: %v", t.Image, err)
			continue
		}
		obs = append(obs, Observation{Trigger: t, ImageID: id})
	}
	plan := Decide(bc, obs, metav1.NewTime(r.Now()))
	switch {
	case plan.Start != nil:
		b, err := r.Starter.Start(ctx, bc.Namespace, bc.Name, *plan.Start)
		switch {
		case errors.Is(err, instantiate.ErrPaused):
			r.Metrics.observe(ResultPaused)
			return next, nil
		case err != nil:
			// Nothing was recorded: the next poll tries again.
			r.Metrics.observe(ResultError)
			r.warn(bc, "ImageChange trigger: starting a build: %v", err)
			return next, nil
		}
		log.FromContext(ctx).Info("an image change started a build", "build", b.Name)
		r.Recorder.Eventf(bc, b, corev1.EventTypeNormal, EventReasonImageChangeTriggered, "Start",
			"Build %s started by %s", b.Name, describeCauses(plan.Start.TriggeredBy))
		r.Metrics.observe(ResultTriggered)
		return next, nil
	case plan.Record != nil:
		bc.Status.ImageChangeTriggers = plan.Record
		if err := r.Client.Status().Update(ctx, bc); err != nil {
			if apierrors.IsConflict(err) {
				// Read again at once: the record is kept on the next try.
				return ctrl.Result{RequeueAfter: time.Millisecond}, nil
			}
			return ctrl.Result{}, fmt.Errorf("recording the ImageChange triggers' images: %w", err)
		}
	}
	if failed {
		r.Metrics.observe(ResultError)
	} else {
		r.Metrics.observe(ResultUnchanged)
	}
	return next, nil
}

func (r *Reconciler) warn(bc *buildv1.BuildConfig, format string, args ...any) {
	r.Recorder.Eventf(bc, nil, corev1.EventTypeWarning, EventReasonImageChangeTriggerFailed, "Poll", format, args...)
}

func describeCauses(causes []buildv1.BuildTriggerCause) string {
	out := ""
	for i, c := range causes {
		if i > 0 {
			out += ", "
		}
		out += c.ImageChangeBuild.FromRef.Name + " (" + c.ImageChangeBuild.ImageID + ")"
	}
	return out
}

func hasConfigChange(bc *buildv1.BuildConfig) bool {
	for _, t := range bc.Spec.Triggers {
		if t.Type == buildv1.ConfigChangeBuildTriggerType {
			return true
		}
	}
	return false
}

// keyring holds the credentials a build of bc pulls with: the Docker
// strategy's pull secret (or the Source strategy's), then the image pull
// secrets of the build's service account, read live (the controller caches
// no Secret). A Secret that is gone or of another type is passed over, as
// the build pods pass it over.
func (r *Reconciler) keyring(ctx context.Context, bc *buildv1.BuildConfig) (*image.Keyring, error) {
	var names []string
	switch s := bc.Spec.Strategy; {
	case s.DockerStrategy != nil && s.DockerStrategy.PullSecret != nil:
		names = append(names, s.DockerStrategy.PullSecret.Name)
	case s.SourceStrategy != nil && s.SourceStrategy.PullSecret != nil:
		names = append(names, s.SourceStrategy.PullSecret.Name)
	}
	sa := bc.Spec.ServiceAccount
	if sa == "" {
		sa = r.Options.BuilderServiceAccount
	}
	account := &corev1.ServiceAccount{}
	switch err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: bc.Namespace, Name: sa}, account); {
	case err == nil:
		for _, s := range account.ImagePullSecrets {
			names = append(names, s.Name)
		}
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading service account %s/%s: %w", bc.Namespace, sa, err)
	}
	keys := &image.Keyring{}
	for _, name := range names {
		secret := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: bc.Namespace, Name: name}, secret)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading secret %s/%s: %w", bc.Namespace, name, err)
		}
		switch secret.Type {
		case corev1.SecretTypeDockerConfigJson:
			err = keys.AddDockerConfigJSON(secret.Data[corev1.DockerConfigJsonKey])
		case corev1.SecretTypeDockercfg:
			err = keys.AddDockercfg(secret.Data[corev1.DockerConfigKey])
		}
		if err != nil {
			r.warn(bc, "ImageChange trigger: secret %s is not a docker config: %v", name, err)
		}
	}
	return keys, nil
}
