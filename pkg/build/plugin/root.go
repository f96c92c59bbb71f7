// Package plugin is kubectl archway (and oc archway): start-build, logs,
// describe and cancel-build for archway's CRD-served Builds, which stock
// oc cannot start, read logs of or cancel (those need subresources a CRD
// does not serve), and prune cache for a BuildConfig's layer cache
// repositories, which nothing else removes entries from. It follows
// kubectl's conventions (k8s.io/cli-runtime: -n, --kubeconfig, --context,
// kubectl's -o printers, shell completion of names) and starts builds
// through package instantiate, the same way as the BuildConfig controller
// and webhooks.
package plugin

import (
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	archwaybuildv1alpha1 "github.com/archway-build/archway/pkg/apis/archwaybuild/v1alpha1"
	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// DisplayName is how users call the plugin, and how its usage text names
// it.
const DisplayName = "kubectl archway"

// NewCommand is the root command, kubectl-archway.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	cmd := &cobra.Command{
		Use:   "kubectl-archway",
		Short: "Start, follow, describe and cancel archway builds, prune their layer caches, install archway (kubectl archway / oc archway)",
		Long: `kubectl archway (and oc archway) starts, follows, describes and cancels the multi-platform Builds and
BuildConfigs archway serves, as oc start-build, oc logs, oc describe and oc cancel-build do on OpenShift, and
prunes their layer caches. kubectl archway install installs archway, with the build half that fits the
cluster.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: DisplayName},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetIn(streams.In)
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	flags.AddFlags(cmd.PersistentFlags())
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(buildv1.AddToScheme(scheme))
	utilruntime.Must(archwaybuildv1alpha1.AddToScheme(scheme))
	o := &env{flags: flags, streams: streams, scheme: scheme}
	cmd.AddCommand(newStartBuild(o), newLogs(o), newDescribe(o), newCancelBuild(o), newPrune(o), newInstall(o), newVersion(o))
	o.registerNamespaceCompletion(cmd)
	return cmd
}

// env is what every command reads: the connection flags, the streams and
// the scheme of the types it reads.
type env struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	scheme  *runtime.Scheme
}

// clients connects: a controller-runtime client for archway's types (with
// watches), a clientset for pods, logs and events, and the namespace.
func (o *env) clients() (client.WithWatch, kubernetes.Interface, string, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, nil, "", err
	}
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, nil, "", err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: o.scheme})
	if err != nil {
		return nil, nil, "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	return c, cs, ns, nil
}
