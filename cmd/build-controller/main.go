// Command build-controller hosts archway's controllers and webhooks. Which
// of them run in a process is chosen with --controllers, like
// kube-controller-manager's flag of that name, so the webhooks and the
// controllers can be deployed and scaled apart from one binary.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/registries"
	"github.com/archway-build/archway/pkg/scheduling/policy"
	"github.com/archway-build/archway/pkg/scheduling/protection"
	"github.com/archway-build/archway/pkg/version"
	"github.com/archway-build/archway/pkg/webhookcert"
)

// component is one controller or webhook the binary can host.
type component struct {
	// name is what --controllers lists.
	name string
	// help says what the component does, for --help.
	help string
	// disabledByDefault components run only when named explicitly.
	disabledByDefault bool
	// setup adds the component to the manager.
	setup func(mgr ctrl.Manager, opts *options) error
	// cache, when set, narrows the manager's cache to what the component
	// reads, before the manager is made.
	cache func(*cache.Options)
	// webhooks is set for components the webhook server serves: the
	// webhook configurations that call them (none for an endpoint no
	// configuration calls), which --cert-management=internal injects its CA
	// into.
	webhooks func() []webhookcert.Configuration
	// tls, when set, adjusts the webhook server's TLS configuration.
	tls func(*tls.Config)
}

// components lists every component this binary hosts. Each package adds one
// line here; the setup function lives next to the code it starts.
func components() []component {
	return []component{
		{name: "build", help: "runs Builds: one pod per platform plus the manifest-list pod", setup: setupBuild, cache: controller.ConfigureCache},
		{name: "buildconfig", help: "starts Builds from BuildConfigs' ConfigChange triggers, cancels what SerialLatestOnly skips, prunes old builds", setup: setupBuildConfig},
		{name: "buildconfig-webhooks", help: "serves BuildConfigs' GitHub, GitLab, Bitbucket and generic webhook triggers and binary builds (instantiatebinary), directly and as the aggregated API triggers.archway.dev/v1alpha1, and the webhook judging image stream references (every replica; needs a serving certificate, see --cert-management)", disabledByDefault: true, setup: setupBuildConfigWebhooks,
			cache: configureWebhooksCache, webhooks: buildConfigWebhooksCertificates, tls: requestClientCertificates},
		// Arch-aware placement is opt-in: the webhook needs a serving
		// certificate (see --cert-management). It gates pods only while a
		// placement controller's heartbeat Lease is fresh, so the two may run
		// in one process or in Deployments of their own.
		{name: "placement-webhook", help: "gates new pods for arch-aware placement (serves on every replica)", disabledByDefault: true, setup: setupPlacementWebhook,
			webhooks: placement.WebhookConfigurations},
		{name: "pod-placement", help: "places gated pods on nodes of their images' architectures (leader only)", disabledByDefault: true, setup: setupPodPlacement, cache: placement.ConfigureControllerCache},
		{name: "placement-operator", help: "runs pod-placement and placement-webhook (their Deployments and cluster-wide bindings) only while the ClusterPodPlacementConfig exists (leader only)", disabledByDefault: true, setup: setupPlacementOperator},
		// Beside placement-operator, which runs whether or not the config
		// exists: a config created through v1alpha1 needs it first.
		{name: "placement-conversion-webhook", help: "converts ClusterPodPlacementConfigs between v1alpha1 and v1beta1 for the apiserver (serves on every replica; needs a serving certificate, see --cert-management)", disabledByDefault: true,
			setup: setupPlacementConversion, webhooks: func() []webhookcert.Configuration { return nil }},
		{name: "scheduling-policy-webhook", help: "injects scheduling criteria from PodSchedulingPolicies into new pods (serves on every replica)", disabledByDefault: true, setup: setupSchedulingPolicyWebhook,
			webhooks: policy.WebhookConfigurations},
		// On OpenShift with its Build capability on (manifests/openshift-builds),
		// where openshift-apiserver evaluates no ValidatingAdmissionPolicy.
		{name: "custom-builds-webhook", help: "admits Custom-strategy Builds and BuildConfigs only with archway's builder image by digest, for openshift-apiserver (serves on every replica; needs a serving certificate, see --cert-management)", disabledByDefault: true,
			setup: setupCustomBuildsWebhook, cache: configureCustomBuildsCache, webhooks: customBuildsWebhookConfigurations},
		{name: "control-plane-protection-webhook", help: "keeps unauthorized pods off control-plane nodes (serves on every replica)", disabledByDefault: true, setup: setupControlPlaneProtection,
			cache: protection.ConfigureCache, webhooks: protection.WebhookConfigurations},
	}
}

type options struct {
	configFile           string
	controllers          []string
	metricsAddr          string
	metricsSecure        bool
	metricsCertDir       string
	probeAddr            string
	pprofAddr            string
	leaderElect          bool
	leaderElectNamespace string
	leaderElectID        string
	leaderElection       leaderElectionTimings
	webhookHost          string
	webhookPort          int
	webhookCertDir       string
	certs                certOptions
	kubeAPIQPS           float32
	kubeAPIBurst         int
	// config is the configuration file, loaded and validated by run.
	config *configv1alpha1.BuildControllerConfiguration
	// logLevel is the process's log level, which a component may raise at
	// run time (placement follows ClusterPodPlacementConfig.spec.logVerbosity).
	logLevel *logLevel
	// registries is the registry configuration's watch, shared by the
	// components (registryStore).
	registries *registries.Store
	// afterStop are what components do once the manager has stopped (its
	// election lease freed), before the process exits.
	afterStop []func(context.Context) error
}

func newRootCommand() *cobra.Command { return newCommand(&options{}) }

// newCommand is the command with its flags parsed into opts.
func newCommand(opts *options) *cobra.Command {
	zapOpts := zap.Options{}
	cmd := &cobra.Command{
		Use:           "build-controller",
		Short:         "Run archway's controllers and webhooks",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.logLevel = adjustableLogLevel(&zapOpts)
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			return run(cmd, opts)
		},
	}
	names := componentNames()
	f := cmd.Flags()
	f.StringVar(&opts.configFile, "config", "", "path of the build-controller configuration file")
	f.StringSliceVar(&opts.controllers, "controllers", []string{"*"}, fmt.Sprintf(
		"components to run: '*' runs every component enabled by default, 'foo' enables foo, '-foo' disables it. "+
			"Components: %s", strings.Join(names, ", ")))
	f.StringVar(&opts.metricsAddr, "metrics-bind-address", ":8443", "address the metrics endpoint binds to; 0 disables it")
	f.BoolVar(&opts.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers authorized for get on /metrics (ClusterRole archway-metrics-reader); false serves plain HTTP to anyone, for local runs")
	f.StringVar(&opts.metricsCertDir, "metrics-cert-dir", "", "directory with tls.crt and tls.key for the metrics endpoint (default: a self-signed certificate made at start)")
	f.StringVar(&opts.probeAddr, "health-probe-bind-address", ":8081", "address the health and readiness probes bind to")
	f.StringVar(&opts.pprofAddr, "pprof-bind-address", "", "address a Go pprof endpoint (/debug/pprof/) binds to, for profiling; empty or 0 disables it (it has no authentication: bind it to loopback)")
	f.BoolVar(&opts.leaderElect, "leader-elect", true, "elect a leader before running controllers (webhooks serve on every replica)")
	f.StringVar(&opts.leaderElectNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's namespace)")
	f.StringVar(&opts.leaderElectID, "leader-election-id", leaderElectionID, "name of the leader election lease: processes running different components need different names")
	addLeaderElectionFlags(f, &opts.leaderElection)
	f.StringVar(&opts.webhookHost, "webhook-host", "", "address the webhook server listens on (default: every address of the host)")
	f.IntVar(&opts.webhookPort, "webhook-port", 9443, "port the webhook server listens on")
	f.StringVar(&opts.webhookCertDir, "webhook-cert-dir", "", "with --cert-management=external, the directory with tls.crt and tls.key for the webhook server (reloaded when they change); with internal, where the certificate served is written (default: a temporary directory)")
	addCertFlags(f, &opts.certs)
	f.Float32Var(&opts.kubeAPIQPS, "kube-api-qps", 0, "client-side limit of queries per second to the apiserver; 0 leaves it to the apiserver's priority and fairness")
	f.IntVar(&opts.kubeAPIBurst, "kube-api-burst", 0, "burst of queries to the apiserver with --kube-api-qps")
	if kubeconfig := flag.CommandLine.Lookup("kubeconfig"); kubeconfig != nil {
		f.AddGoFlag(kubeconfig) // controller-runtime's --kubeconfig
	}
	goFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(goFlags)
	f.AddGoFlagSet(goFlags)
	return cmd
}

func componentNames() []string {
	var names []string
	for _, c := range components() {
		names = append(names, c.name)
	}
	sort.Strings(names)
	return names
}

// enabledComponents applies --controllers to the component list.
func enabledComponents(all []component, selection []string) ([]component, error) {
	known := map[string]bool{}
	for _, c := range all {
		known[c.name] = true
	}
	for _, s := range selection {
		name := strings.TrimPrefix(s, "-")
		if s != "*" && !known[name] {
			return nil, fmt.Errorf("--controllers: unknown component %q; known components: %s", name, strings.Join(componentNames(), ", "))
		}
	}
	var out []component
	for _, c := range all {
		on := !c.disabledByDefault && slices.Contains(selection, "*")
		if slices.Contains(selection, c.name) {
			on = true
		}
		if slices.Contains(selection, "-"+c.name) {
			on = false
		}
		if on {
			out = append(out, c)
		}
	}
	return out, nil
}

func run(cmd *cobra.Command, opts *options) error {
	enabled, err := enabledComponents(components(), opts.controllers)
	if err != nil {
		return err
	}
	if err := opts.leaderElection.validate(); err != nil {
		return err
	}
	if len(enabled) == 0 {
		return fmt.Errorf("no component to run: --controllers=%s selects none of: %s",
			strings.Join(opts.controllers, ","), strings.Join(componentNames(), ", "))
	}
	return runManager(cmd.Context(), opts, enabled)
}

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "build-controller:", err)
		os.Exit(1)
	}
}
