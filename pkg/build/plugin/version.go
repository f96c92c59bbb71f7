package plugin

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/openshiftapi"
	"github.com/archway-build/archway/pkg/version"
)

// versionInfo is what kubectl archway version prints.
type versionInfo struct {
	// Client is the plugin's version.
	Client string `json:"clientVersion"`
	// Kubernetes is the cluster's version (unset with --client or when
	// the cluster cannot be reached).
	Kubernetes string `json:"kubernetesVersion,omitempty"`
	// BuildAPI says who serves build.openshift.io/v1 on the cluster:
	// "archway" (its CRDs), "OpenShift", or "none".
	BuildAPI string `json:"buildAPI,omitempty"`
}

func newVersion(o *env) *cobra.Command {
	var clientOnly bool
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version, the cluster's, and who serves the build API there",
		Long: `Print the plugin's version and, unless --client, the cluster's Kubernetes version and who serves
build.openshift.io/v1 there: archway (its CRDs: use kubectl archway), OpenShift (oc start-build works as
well), or none (archway is not installed).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return fmt.Errorf("--output %q: use json or yaml, or leave it out", output)
			}
			info := versionInfo{Client: clientVersion()}
			var serverErr error
			if !clientOnly {
				serverErr = o.serverVersion(&info)
			}
			if err := printVersion(o, info, output); err != nil {
				return err
			}
			return serverErr
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the plugin's version only, without reaching the cluster")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml")
	return cmd
}

// clientVersion is the version the release stamped in, else the module
// version go install recorded, else "dev".
func clientVersion() string {
	if version.Version != "dev" {
		return version.Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version.Version
}

func (o *env) serverVersion(info *versionInfo) error {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the cluster's version: %w", err)
	}
	info.Kubernetes = v.GitVersion
	info.BuildAPI = "none"
	resources, err := dc.ServerResourcesForGroupVersion(buildv1.GroupVersion.String())
	if err != nil {
		return nil //nolint:nilerr // the group is not served: archway is not installed
	}
	// OpenShift serves subresources (builds/clone, buildconfigs/instantiate,
	// ...) no CRD can.
	if openshiftapi.ServedByOpenShift(resources.APIResources) {
		info.BuildAPI = "OpenShift"
	} else if slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == "builds" }) {
		info.BuildAPI = "archway"
	}
	return nil
}

func printVersion(o *env, info versionInfo, output string) error {
	switch output {
	case "json":
		data, err := json.MarshalIndent(info, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(o.streams.Out, string(data))
		return err
	case "yaml":
		data, err := yaml.Marshal(info)
		if err != nil {
			return err
		}
		_, err = o.streams.Out.Write(data)
		return err
	}
	_, _ = fmt.Fprintf(o.streams.Out, "Client Version: %s\n", info.Client)
	if info.Kubernetes != "" {
		_, _ = fmt.Fprintf(o.streams.Out, "Kubernetes Version: %s\n", info.Kubernetes)
		_, _ = fmt.Fprintf(o.streams.Out, "Build API (build.openshift.io/v1): %s\n", info.BuildAPI)
	}
	return nil
}
