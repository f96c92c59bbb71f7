package placement

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/archway-build/archway/pkg/placement/registries"
)

// The permissions of the two components, each with the reason for every
// rule, are written by hand in manifests/placement/rbac (both share this
// package, and controller-gen makes one role per package); the install test
// on the bed runs each component under its own role. The controller's
// registry configuration reads ConfigMaps of archway's namespace only
// (a Role) and OpenShift's mirror sets.

// ConfigureControllerCache narrows the manager's cache of the process that
// runs the placement controller: of the MutatingWebhookConfigurations it
// reads and updates only its own (Options.WebhookConfigurationName, the
// default name), so its role can name that one object.
func ConfigureControllerCache(o *cache.Options) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&admissionregistrationv1.MutatingWebhookConfiguration{}] = cache.ByObject{
		Field: fields.OneTermEqualSelector("metadata.name", WebhookConfigurationName),
	}
}

// GatedSelector selects the pods the webhook gated and the controller has
// not released yet: what the webhook's event informer watches.
func GatedSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{SchedulingGateLabel: SchedulingGateLabelGated})
}

// UnboundSelector selects the pods no node has been chosen for: every pod
// carrying the gate is among them, whoever added the gate (the webhook, a
// template or backup that kept it, an earlier placement controller), so
// none is missed; a cluster's running pods cost the controller nothing.
func UnboundSelector() fields.Selector {
	return fields.OneTermEqualSelector("spec.nodeName", "")
}

// HeartbeatKey is the heartbeat lease of opts.
func HeartbeatKey(opts Options) types.NamespacedName {
	ns := opts.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return types.NamespacedName{Namespace: ns, Name: HeartbeatLeaseName}
}

// OnEveryReplica runs a cache on every replica, leader or not: the
// webhook, served by all of them, reads it. The manager decides where a
// runnable runs by its NeedLeaderElection, and only controller-runtime's
// plain informer cache says false: a cache narrowed to namespaces or with
// options per object would otherwise start only on the leader, and a
// standby replica's webhook would never be ready.
type OnEveryReplica struct{ cache.Cache }

// NeedLeaderElection: no, the webhook needs it everywhere.
func (OnEveryReplica) NeedLeaderElection() bool { return false }

// OnLeaderOnly runs a cache on the elected leader only: only the leader's
// controllers read it, so a standby spends no memory on pods it does not
// place, and the new leader fills it when it takes over.
type OnLeaderOnly struct{ cache.Cache }

// NeedLeaderElection: yes, only the leader's controllers read it.
func (OnLeaderOnly) NeedLeaderElection() bool { return true }

var (
	_ manager.LeaderElectionRunnable = OnEveryReplica{}
	_ manager.LeaderElectionRunnable = OnLeaderOnly{}
)

// Register registers each collector with reg.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}

// DefaultServiceCAConfigMap is the ConfigMap of archway's namespace that
// OpenShift's service CA operator fills (manifests/openshift ships it
// annotated service.beta.openshift.io/inject-cabundle): the CA the
// internal registry's certificate is signed by.
const DefaultServiceCAConfigMap = "archway-service-ca"

// SetupRegistries starts the watch of the registry configuration opts
// names (the registries ConfigMap, the CA ConfigMaps in opts.Namespace, the
// mirror sets, registriesConfPath, insecureRegistries) and, on OpenShift,
// its ImageContentSourcePolicies, image config, additionalTrustedCA and
// service CA: one configuration for placement's inspection and for
// builds, whose pods are handed it.
func SetupRegistries(mgr manager.Manager, opts Options) (*registries.Store, error) {
	opts = opts.WithDefaults()
	return registries.Setup(mgr, registries.WatchOptions{
		Namespace: HeartbeatKey(opts).Namespace, ConfigMap: opts.RegistriesConfigMap,
		RegistryCAConfigMap: opts.RegistryCAConfigMap, TrustedCAConfigMap: opts.TrustedCAConfigMap,
		ServiceCAConfigMap: DefaultServiceCAConfigMap,
		BaseFile:           opts.RegistriesConfPath, InsecureRegistries: opts.InsecureRegistries, Dir: opts.RegistriesDir,
		Recorder: mgr.GetEventRecorder("registry-configuration"),
	})
}
