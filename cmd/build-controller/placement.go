package main

import (
	"fmt"
	"os"
	"time"

	uzap "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/config"
	"github.com/archway-build/archway/pkg/placement/conversion"
	"github.com/archway-build/archway/pkg/placement/execformat"
	"github.com/archway-build/archway/pkg/placement/operator"
	"github.com/archway-build/archway/pkg/placement/podcontroller"
	"github.com/archway-build/archway/pkg/placement/registries"
	"github.com/archway-build/archway/pkg/placement/webhook"
)

// logLevel is the process's zap level, adjustable at run time without
// going below what --zap-log-level asked for.
type logLevel struct {
	level uzap.AtomicLevel
	base  zapcore.Level
}

// adjustableLogLevel makes the logger's level an atomic one the
// components can change, keeping --zap-log-level as its floor.
func adjustableLogLevel(o *zap.Options) *logLevel {
	var lvl uzap.AtomicLevel
	switch l := o.Level.(type) {
	case uzap.AtomicLevel:
		lvl = l
	case *uzap.AtomicLevel:
		lvl = *l
	default:
		base := zapcore.InfoLevel
		if o.Development {
			base = zapcore.DebugLevel
		}
		lvl = uzap.NewAtomicLevelAt(base)
		o.Level = lvl
	}
	return &logLevel{level: lvl, base: lvl.Level()}
}

// setVerbosity logs up to logr V(v) (zap level -v), or more when the flags
// asked for more.
func (l *logLevel) setVerbosity(v int) {
	if l == nil {
		return
	}
	v = min(max(v, 0), 10) // logr verbosities in zap's int8 range
	l.level.SetLevel(min(l.base, zapcore.Level(-int8(v))))
}

// setupPlacementWebhook serves the scheduling-gate webhook
// (pkg/placement/webhook) on every replica.
func setupPlacementWebhook(mgr ctrl.Manager, opts *options) error {
	return webhook.Setup(mgr, placementOptions(&opts.config.Placement), metrics.Registry)
}

// setupPodPlacement runs the pod placement controller
// (pkg/placement/podcontroller) and the config controller
// (pkg/placement/config) on the leader. A leader stopped while the
// ClusterPodPlacementConfig lives hands the gated pods over: after the
// manager has stopped, the process waits for another replica to lead, long
// enough for a standby's next leader election retry.
func setupPodPlacement(mgr ctrl.Manager, opts *options) error {
	o := placementOptions(&opts.config.Placement)
	o.SetLogVerbosity = opts.logLevel.setVerbosity
	o.HandoverTimeout = opts.leaderElection.handoverTimeout()
	o.HeartbeatTTL = opts.leaderElection.heartbeatTTL()
	var err error
	if o.Registries, err = opts.registryStore(mgr); err != nil {
		return err
	}
	pods, err := podcontroller.Setup(mgr, o, metrics.Registry)
	if err != nil {
		return err
	}
	c, err := config.Setup(mgr, o, pods)
	if err != nil {
		return err
	}
	if err := setupExecFormatMonitor(mgr); err != nil {
		return err
	}
	opts.afterStop = append(opts.afterStop, c.Finish)
	return nil
}

// setupPlacementOperator runs the placement operator
// (pkg/placement/operator) on the leader: it starts pod-placement and
// placement-webhook with the ClusterPodPlacementConfig and stops them when
// the config goes.
func setupPlacementOperator(mgr ctrl.Manager, _ *options) error {
	return operator.Setup(mgr, ownNamespace(), metrics.Registry)
}

// setupPlacementConversion serves the ClusterPodPlacementConfig
// conversion webhook (pkg/placement/conversion) on every replica; with
// --cert-management=internal it writes its CA into the CRD, as the
// rotator does into the webhook configurations of the other components.
func setupPlacementConversion(mgr ctrl.Manager, opts *options) error {
	var inject *conversion.CAInjection
	if opts.certs.management == certInternal {
		ns := ownNamespace()
		inject = &conversion.CAInjection{
			Secret:  types.NamespacedName{Namespace: ns, Name: opts.certs.secret},
			Service: types.NamespacedName{Namespace: ns, Name: opts.certs.service},
		}
	}
	return conversion.Setup(mgr, inject)
}

// setupExecFormatMonitor runs the exec-format-error monitor
// (pkg/placement/execformat) on the leader, watching while the
// ClusterPodPlacementConfig enables it.
func setupExecFormatMonitor(mgr ctrl.Manager) error {
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	m, err := execformat.New(cs, mgr.GetCache(), mgr.GetEventRecorder("exec-format-error-monitor"), metrics.Registry,
		mgr.GetLogger().WithName("exec-format-error-monitor"))
	if err != nil {
		return err
	}
	return mgr.Add(m)
}

// placementOptions maps the placement section of --config onto
// placement.Options; zero values keep placement's defaults.
func placementOptions(cfg *configv1alpha1.PlacementConfig) placement.Options {
	o := placement.Options{
		Namespace:          os.Getenv("POD_NAMESPACE"),
		InsecureRegistries: cfg.InsecureRegistries,
		RegistriesConfPath: cfg.RegistriesConfPath,
		// Empty names keep placement's defaults.
		RegistriesConfigMap: cfg.Registries.ConfigMap,
		RegistryCAConfigMap: cfg.Registries.RegistryCAConfigMap,
		TrustedCAConfigMap:  cfg.Registries.TrustedCAConfigMap,
		InspectionTries:     int(cfg.Inspection.Tries),
		InspectionBackoff:   duration(cfg.Inspection.Backoff),
		InspectionDeadline:  duration(cfg.Inspection.Deadline),
		InspectionTimeout:   duration(cfg.Inspection.Timeout),
		MaxImagesPerPod:     int(cfg.Inspection.MaxImagesPerPod),
		ReconcileTimeout:    duration(cfg.Inspection.ReconcileTimeout),
		DigestCacheTTL:      duration(cfg.Cache.DigestTTL),
		TagCacheTTL:         duration(cfg.Cache.TagTTL),
		CacheSize:           int(cfg.Cache.Size),
		Workers:             int(cfg.Workers),
	}
	o.InspectionMaxBackoff = duration(cfg.Inspection.MaxBackoff)
	if o.Namespace == "" {
		o.Namespace = podNamespace()
	}
	if ref := cfg.GlobalPullSecret; ref != nil {
		o.GlobalPullSecret = types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	}
	return o
}

func duration(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

// registryStore is the process's one watch of the registry configuration
// (the placement section's registries, registriesConfPath and
// insecureRegistries), started by the first component that needs it:
// placement inspects images with it, the Build controller hands it to
// build pods.
func (o *options) registryStore(mgr ctrl.Manager) (*registries.Store, error) {
	if o.registries == nil {
		store, err := placement.SetupRegistries(mgr, placementOptions(&o.config.Placement))
		if err != nil {
			return nil, fmt.Errorf("the registry configuration: %w", err)
		}
		o.registries = store
	}
	return o.registries, nil
}
