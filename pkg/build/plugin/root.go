// Package plugin is kubectl archway (and oc archway): start-build, logs,
// describe and cancel-build for archway's CRD-served Builds, which stock
// oc cannot start, read logs of or cancel (those need subresources a CRD
// does not serve), and prune cache for a BuildConfig's layer cache
// repositories, which nothing else removes entries from. It follows
// kubectl's conventions (k8s.io/cli-runtime: -n, --kubeconfig, --context,
// -o) and starts builds through package
// instantiate, the same way as the BuildConfig controller and webhooks.
package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// NewCommand is the root command, kubectl-archway.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	cmd := &cobra.Command{
		Use:           "kubectl-archway",
		Short:         "Start, follow, describe and cancel archway builds, and prune their layer caches (kubectl archway / oc archway)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flags.AddFlags(cmd.PersistentFlags())
	o := &env{flags: flags, streams: streams}
	cmd.AddCommand(newStartBuild(o), newLogs(o), newDescribe(o), newCancelBuild(o), newPrune(o))
	return cmd
}

// env is what every command reads: the connection flags and the streams.
type env struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
}

// clients connects: a controller-runtime client for archway's types, a
// clientset for pods, logs and events, and the namespace.
func (o *env) clients() (client.Client, kubernetes.Interface, string, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, nil, "", err
	}
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, nil, "", err
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(buildv1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	return c, cs, ns, nil
}

// printObject prints obj as -o asks: json, yaml, name, or (empty) the
// message.
func printObject(w io.Writer, output string, obj runtime.Object, message string) error {
	var p printers.ResourcePrinter
	switch output {
	case "":
		_, err := fmt.Fprintln(w, message)
		return err
	case "json":
		p = &printers.JSONPrinter{}
	case "yaml":
		p = &printers.YAMLPrinter{}
	case "name":
		p = &printers.NamePrinter{}
	default:
		return fmt.Errorf("--output %q: use json, yaml or name", output)
	}
	return p.PrintObj(obj, w)
}

// buildName accepts NAME, build/NAME and builds/NAME (and the group-qualified
// forms kubectl prints).
func buildName(arg string) (string, error) {
	kind, name, found := strings.Cut(arg, "/")
	if !found {
		return arg, nil
	}
	switch kind {
	case "build", "builds", "build.build.openshift.io", "builds.build.openshift.io":
		return name, nil
	}
	return "", fmt.Errorf("%q is not a build: use NAME or build/NAME", arg)
}
