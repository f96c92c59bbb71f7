package registries

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1alpha1 "github.com/openshift/api/operator/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Event reasons of the registry configuration, recorded on the
// ConfigMap or mirror set they concern.
const (
	// EventConfigurationApplied: the object's content is in the
	// configuration the next inspection uses.
	EventConfigurationApplied = "RegistryConfigurationApplied"
	// EventConfigurationInvalid: the object's content cannot be used; the
	// previous configuration stays.
	EventConfigurationInvalid = "RegistryConfigurationInvalid"
)

// WatchOptions name the sources of the registry configuration.
type WatchOptions struct {
	// Namespace is archway's namespace, where the ConfigMaps are read.
	Namespace string
	// ConfigMap holds a registries.conf under RegistriesConfKey.
	ConfigMap string
	// RegistryCAConfigMap holds per-registry CA bundles.
	RegistryCAConfigMap string
	// TrustedCAConfigMap holds the CA bundle trusted for every registry
	// under TrustedCAKey.
	TrustedCAConfigMap string
	// ServiceCAConfigMap holds OpenShift's service CA under ServiceCAKey
	// (the service CA operator fills a ConfigMap annotated
	// ServiceCAInjectAnnotation), trusted for the internal registry the
	// image config names; read where the cluster serves the image config.
	ServiceCAConfigMap string
	// BaseFile is a registries.conf file merged first; empty: none.
	BaseFile string
	// InsecureRegistries are marked insecure.
	InsecureRegistries []string
	// Dir is where the generated files are written; empty: a new
	// directory under the system's temporary directory.
	Dir string
	// Recorder records the events; nil: none.
	Recorder events.EventRecorder
}

// mirrorSetKinds are OpenShift's mirror sets, read when the cluster
// serves them.
var (
	digestMirrorSetKind     = schema.GroupKind{Group: configv1.GroupName, Kind: "ImageDigestMirrorSet"}
	tagMirrorSetKind        = schema.GroupKind{Group: configv1.GroupName, Kind: "ImageTagMirrorSet"}
	imageConfigKind         = schema.GroupKind{Group: configv1.GroupName, Kind: "Image"}
	contentSourcePolicyKind = schema.GroupKind{Group: operatorv1alpha1.GroupName, Kind: "ImageContentSourcePolicy"}
)

// served reports whether the cluster serves gk in version (discovery).
func served(mapper meta.RESTMapper, gk schema.GroupKind, version string) (bool, error) {
	_, err := mapper.RESTMapping(gk, version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discovering %s: %w", gk, err)
	}
	return true, nil
}

// OnOpenShift reports whether the cluster serves OpenShift's image config
// (image.config.openshift.io): an OpenShift cluster, whose nodes pull
// with openshift-config/pull-secret.
func OnOpenShift(mapper meta.RESTMapper) (bool, error) {
	return served(mapper, imageConfigKind, configv1.GroupVersion.Version)
}

// Setup adds to mgr the controller that watches the sources in opts and
// keeps the returned Store's Settings current. It reads ConfigMaps of
// opts.Namespace only, and the mirror sets when the cluster serves
// config.openshift.io/v1 (discovered once, at start; without them it runs
// on the ConfigMaps alone). It runs on the elected leader, like the
// inspection that uses it; Store.Current waits for its first
// configuration.
func Setup(mgr ctrl.Manager, opts WatchOptions) (*Store, error) {
	if opts.BaseFile != "" {
		// A file given at start must be readable at start.
		if _, err := os.ReadFile(opts.BaseFile); err != nil {
			return nil, fmt.Errorf("registriesConfPath: %w", err)
		}
	}
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "archway-registries-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := configv1.Install(scheme); err != nil {
		return nil, err
	}
	if err := operatorv1alpha1.Install(scheme); err != nil {
		return nil, err
	}
	r := &watcher{opts: opts, store: NewStore(dir), applied: map[string]string{}}
	for _, k := range []struct {
		gk      schema.GroupKind
		version string
		on      *bool
	}{
		{digestMirrorSetKind, configv1.GroupVersion.Version, &r.digestSets},
		{tagMirrorSetKind, configv1.GroupVersion.Version, &r.tagSets},
		{contentSourcePolicyKind, operatorv1alpha1.GroupVersion.Version, &r.contentPolicies},
		{imageConfigKind, configv1.GroupVersion.Version, &r.imageConfig},
	} {
		var err error
		if *k.on, err = served(mgr.GetRESTMapper(), k.gk, k.version); err != nil {
			return nil, err
		}
	}
	cmNamespaces := map[string]cache.Config{opts.Namespace: {}}
	if r.imageConfig {
		// The additionalTrustedCA ConfigMap, whose name the image config
		// says.
		cmNamespaces[OpenShiftConfigNamespace] = cache.Config{}
	}
	byObject := map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Namespaces: cmNamespaces}}
	if r.digestSets {
		byObject[&configv1.ImageDigestMirrorSet{}] = cache.ByObject{}
	}
	if r.tagSets {
		byObject[&configv1.ImageTagMirrorSet{}] = cache.ByObject{}
	}
	if r.contentPolicies {
		byObject[&operatorv1alpha1.ImageContentSourcePolicy{}] = cache.ByObject{}
	}
	if r.imageConfig {
		// The one object OpenShift reads, by name, so that a role can name
		// it.
		byObject[&configv1.Image{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", ImageConfigName)}
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: scheme, Mapper: mgr.GetRESTMapper(), DefaultTransform: cache.TransformStripManagedFields(), ByObject: byObject,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	r.reader = c
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "registries"}}}
	})
	names := []string{opts.ConfigMap, opts.RegistryCAConfigMap, opts.TrustedCAConfigMap}
	if r.imageConfig {
		names = append(names, opts.ServiceCAConfigMap)
	}
	// One build at start, whether or not any source exists.
	start := make(chan event.GenericEvent, 1)
	start <- event.GenericEvent{Object: &corev1.ConfigMap{}}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("placement-registries").
		WatchesRawSource(source.Channel(start, one)).
		WatchesRawSource(source.Kind(c, client.Object(&corev1.ConfigMap{}), one,
			predicate.NewPredicateFuncs(func(o client.Object) bool {
				return o.GetNamespace() == OpenShiftConfigNamespace || slices.Contains(names, o.GetName())
			})))
	if r.digestSets {
		b = b.WatchesRawSource(source.Kind(c, client.Object(&configv1.ImageDigestMirrorSet{}), one))
	}
	if r.tagSets {
		b = b.WatchesRawSource(source.Kind(c, client.Object(&configv1.ImageTagMirrorSet{}), one))
	}
	if r.contentPolicies {
		b = b.WatchesRawSource(source.Kind(c, client.Object(&operatorv1alpha1.ImageContentSourcePolicy{}), one))
	}
	if r.imageConfig {
		b = b.WatchesRawSource(source.Kind(c, client.Object(&configv1.Image{}), one))
	}
	if err := b.Complete(r); err != nil {
		return nil, err
	}
	return r.store, nil
}

// watcher rebuilds the configuration from all its sources on any change.
type watcher struct {
	opts       WatchOptions
	reader     client.Reader
	store      *Store
	digestSets bool
	tagSets    bool
	// contentPolicies and imageConfig: the cluster serves
	// ImageContentSourcePolicies and the image config.
	contentPolicies bool
	imageConfig     bool
	mu              sync.Mutex
	applied         map[string]string // "kind/name" -> resourceVersion last applied
}

func (w *watcher) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	in := Inputs{InsecureRegistries: w.opts.InsecureRegistries}
	if w.opts.BaseFile != "" {
		data, err := os.ReadFile(w.opts.BaseFile)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("registriesConfPath: %w", err)
		}
		in.Base = string(data)
	}
	var sources []client.Object
	getIn := func(ns, name string) (*corev1.ConfigMap, error) {
		cm := &corev1.ConfigMap{}
		err := w.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm)
		if apierrors.IsNotFound(err) || name == "" {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		sources = append(sources, cm)
		return cm, nil
	}
	get := func(name string) (*corev1.ConfigMap, error) { return getIn(w.opts.Namespace, name) }
	conf, err := get(w.opts.ConfigMap)
	if err != nil {
		return reconcile.Result{}, err
	}
	if conf != nil {
		in.Conf = conf.Data[RegistriesConfKey]
	}
	cas, err := get(w.opts.RegistryCAConfigMap)
	if err != nil {
		return reconcile.Result{}, err
	}
	if cas != nil {
		in.RegistryCAs = cas.Data
	}
	trusted, err := get(w.opts.TrustedCAConfigMap)
	if err != nil {
		return reconcile.Result{}, err
	}
	if trusted != nil {
		in.TrustedCA = trusted.Data[TrustedCAKey]
	}
	if w.digestSets {
		list := &configv1.ImageDigestMirrorSetList{}
		if err := w.reader.List(ctx, list); err != nil {
			return reconcile.Result{}, err
		}
		in.DigestMirrorSets = list.Items
		for i := range list.Items {
			// Typed, so that events name their kind without the manager's
			// scheme knowing it.
			list.Items[i].SetGroupVersionKind(configv1.GroupVersion.WithKind(digestMirrorSetKind.Kind))
			sources = append(sources, &list.Items[i])
		}
	}
	if w.tagSets {
		list := &configv1.ImageTagMirrorSetList{}
		if err := w.reader.List(ctx, list); err != nil {
			return reconcile.Result{}, err
		}
		in.TagMirrorSets = list.Items
		for i := range list.Items {
			list.Items[i].SetGroupVersionKind(configv1.GroupVersion.WithKind(tagMirrorSetKind.Kind))
			sources = append(sources, &list.Items[i])
		}
	}
	var culprits openShiftCulprits
	if w.contentPolicies {
		list := &operatorv1alpha1.ImageContentSourcePolicyList{}
		if err := w.reader.List(ctx, list); err != nil {
			return reconcile.Result{}, err
		}
		in.ContentSourcePolicies = list.Items
		for i := range list.Items {
			list.Items[i].SetGroupVersionKind(operatorv1alpha1.GroupVersion.WithKind(contentSourcePolicyKind.Kind))
			sources = append(sources, &list.Items[i])
		}
	}
	if w.imageConfig {
		img := &configv1.Image{}
		switch err := w.reader.Get(ctx, types.NamespacedName{Name: ImageConfigName}, img); {
		case err == nil:
			img.SetGroupVersionKind(configv1.GroupVersion.WithKind(imageConfigKind.Kind))
			in.ImageConfig = img
			culprits.imageConfig = img
			sources = append(sources, img)
		case !apierrors.IsNotFound(err):
			return reconcile.Result{}, err
		}
		if in.ImageConfig != nil && in.ImageConfig.Spec.AdditionalTrustedCA.Name != "" {
			cm, err := getIn(OpenShiftConfigNamespace, in.ImageConfig.Spec.AdditionalTrustedCA.Name)
			if err != nil {
				return reconcile.Result{}, err
			}
			if cm != nil {
				in.AdditionalTrustedCAs = cm.Data
				culprits.additionalCA = cm
			}
		}
		cm, err := get(w.opts.ServiceCAConfigMap)
		if err != nil {
			return reconcile.Result{}, err
		}
		if cm != nil {
			in.ServiceCA = cm.Data[ServiceCAKey]
			culprits.serviceCA = cm
		}
	}
	gen, err := Build(in)
	if err == nil {
		_, err = w.store.Update(gen)
	}
	if err != nil {
		w.refused(ctx, err, sources, conf, cas, trusted, culprits)
		if !w.store.Ready() {
			// Nothing usable yet: start from the options alone, so that
			// inspection is not held by a bad ConfigMap.
			base, berr := Build(Inputs{Base: in.Base, InsecureRegistries: in.InsecureRegistries})
			if berr == nil {
				_, berr = w.store.Update(base)
			}
			if berr != nil {
				return reconcile.Result{}, berr
			}
		}
		// The sources must change before another try can succeed.
		return reconcile.Result{}, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range sources {
		key := fmt.Sprintf("%T/%s", o, o.GetName())
		if w.applied[key] == o.GetResourceVersion() {
			continue
		}
		w.applied[key] = o.GetResourceVersion()
		w.event(o, corev1.EventTypeNormal, EventConfigurationApplied,
			"Registry configuration generation %d applied (resourceVersion %s): the next image inspection and the next build pods use it", w.store.generation(), o.GetResourceVersion())
	}
	logger.Info("applied the registry configuration", "generation", w.store.generation(), "sources", len(sources))
	return reconcile.Result{}, nil
}

// openShiftCulprits are the OpenShift sources an InputError can name.
type openShiftCulprits struct {
	imageConfig             *configv1.Image
	additionalCA, serviceCA *corev1.ConfigMap
}

// refused logs and records an unusable configuration on the object it
// came from: the ConfigMap named in the error, else every source.
func (w *watcher) refused(ctx context.Context, err error, sources []client.Object, conf, cas, trusted *corev1.ConfigMap, oc openShiftCulprits) {
	log.FromContext(ctx).Error(err, "the registry configuration cannot be used; keeping the previous one")
	var inErr *InputError
	var culprit client.Object
	if errors.As(err, &inErr) {
		switch {
		case conf != nil && inErr.Source == "the registries ConfigMap's "+RegistriesConfKey:
			culprit = conf
		case cas != nil && inErr.Source == "the registry CA ConfigMap":
			culprit = cas
		case trusted != nil && inErr.Source == "the trusted CA ConfigMap's "+TrustedCAKey:
			culprit = trusted
		case oc.imageConfig != nil && inErr.Source == imageConfigSource:
			culprit = oc.imageConfig
		case oc.additionalCA != nil && inErr.Source == additionalCASource:
			culprit = oc.additionalCA
		case oc.serviceCA != nil && inErr.Source == serviceCASource:
			culprit = oc.serviceCA
		case strings.HasPrefix(inErr.Source, contentSourcePolicySource):
			name := strings.TrimPrefix(inErr.Source, contentSourcePolicySource)
			for _, o := range sources {
				if p, ok := o.(*operatorv1alpha1.ImageContentSourcePolicy); ok && p.Name == name {
					culprit = p
				}
			}
		}
	}
	targets := sources
	if culprit != nil {
		targets = []client.Object{culprit}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range targets {
		// Applied no more: a fix to the same content is reported again.
		delete(w.applied, fmt.Sprintf("%T/%s", o, o.GetName()))
		w.event(o, corev1.EventTypeWarning, EventConfigurationInvalid,
			"Registry configuration not applied, the previous one stays: %s", err.Error())
	}
}

func (w *watcher) event(o client.Object, eventType, reason, format string, args ...any) {
	if w.opts.Recorder == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if len(msg) > 1000 {
		msg = msg[:1000] + "..."
	}
	w.opts.Recorder.Eventf(o, nil, eventType, reason, "Configure", "%s", msg)
}

// generation is the current Settings' generation, 0 when none.
func (s *Store) generation() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.cur == nil {
		return 0
	}
	return s.cur.Generation
}

// Ready reports whether the Store has Settings.
func (s *Store) Ready() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur != nil
}
