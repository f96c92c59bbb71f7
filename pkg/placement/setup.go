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
)

// The permissions of the two components, each with the reason for every
// rule, are written by hand in manifests/placement/rbac (one package holds
// both, and controller-gen makes one role per package); the install test
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

// gatedSelector selects the pods the webhook gated and the controller has
// not released yet: what the webhook's event informer watches.
func gatedSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{SchedulingGateLabel: SchedulingGateLabelGated})
}

// unboundSelector selects the pods no node has been chosen for: every pod
// carrying the gate is among them, whoever added the gate (the webhook, a
// template or backup that kept it, an earlier placement controller), so
// none is missed; a cluster's running pods cost the controller nothing.
func unboundSelector() fields.Selector {
	return fields.OneTermEqualSelector("spec.nodeName", "")
}

// heartbeatKey is the heartbeat lease of opts.
func heartbeatKey(opts Options) types.NamespacedName {
	ns := opts.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return types.NamespacedName{Namespace: ns, Name: HeartbeatLeaseName}
}

// onEveryReplica runs a cache on every replica, leader or not: the
// webhook, served by all of them, reads it. The manager decides where a
// runnable runs by its NeedLeaderElection, and only controller-runtime's
// plain informer cache says false: a cache narrowed to namespaces or with
// options per object would otherwise start only on the leader, and a
// standby replica's webhook would never be ready.
type onEveryReplica struct{ cache.Cache }

// NeedLeaderElection: no, the webhook needs it everywhere.
func (onEveryReplica) NeedLeaderElection() bool { return false }

// onLeaderOnly runs a cache on the elected leader only: only the leader's
// controllers read it, so a standby spends no memory on pods it does not
// place, and the new leader fills it when it takes over.
type onLeaderOnly struct{ cache.Cache }

// NeedLeaderElection: yes, only the leader's controllers read it.
func (onLeaderOnly) NeedLeaderElection() bool { return true }

var (
	_ manager.LeaderElectionRunnable = onEveryReplica{}
	_ manager.LeaderElectionRunnable = onLeaderOnly{}
)

// register registers each collector with reg.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}
