package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/archway-build/archway/pkg/build/custombuilds"
	"github.com/archway-build/archway/pkg/build/openshiftapi"
)

// installFieldManager owns the fields kubectl archway install applies.
const installFieldManager = "kubectl-archway"

// installOptions are install's flags.
type installOptions struct {
	manifests string
	overlay   string
	crds      string
	dryRun    bool
	force     bool
	timeout   time.Duration
}

func newInstall(o *env) *cobra.Command {
	opts := installOptions{}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install archway: its CRDs, then an install overlay, the build half chosen by who serves build.openshift.io",
		Long: `Install archway onto the cluster with server-side apply, as kubectl apply --server-side -k does: the
CRDs first (waiting until they are established), then the install overlay.

Which build half is installed follows who serves build.openshift.io there. Where OpenShift does (its Build
capability on), the custom-builder mode: manifests/openshift-builds and its CRDs, which hold none of
build.openshift.io. Elsewhere, archway's own Build API: manifests/default and manifests/crd. With -k, the
overlay given (a release, say) and the crd/ directory beside it, else manifests/crd. Nothing is applied when
the choice would create a build.openshift.io CRD that OpenShift's API shadows, or install the custom-builder
mode where no OpenShift build controller would run its Builds.`,
		Example: `  # From a checkout: manifests/default, or manifests/openshift-builds on OpenShift with its Build capability on
  kubectl archway install
  # A release's overlay, its images pinned by digest (make release-manifests)
  kubectl archway install -k manifests/release
  kubectl archway install -k manifests/release/openshift-builds   # OpenShift with its Build capability on
  # Print what would be applied, change nothing
  kubectl archway install --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.install(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.manifests, "manifests", "manifests", "the directory of archway's manifests (a checkout's manifests/)")
	f.StringVarP(&opts.overlay, "kustomize", "k", "", "the install overlay (default: <manifests>/default, or <manifests>/openshift-builds where OpenShift serves build.openshift.io)")
	f.StringVar(&opts.crds, "crds", "", "the CRDs' kustomization, applied first (default: the overlay's crd/ if it has one, else <manifests>/openshift-builds/crd for the custom-builder mode, else <manifests>/crd)")
	f.BoolVar(&opts.dryRun, "dry-run", false, "print what would be applied and change nothing")
	f.BoolVar(&opts.force, "force-conflicts", false, "take the fields another manager set to other values, as kubectl apply --server-side --force-conflicts does (an upgrade of an install kubectl applied)")
	f.DurationVar(&opts.timeout, "timeout", time.Minute, "how long to wait for the CRDs to be established")
	return cmd
}

// installOverlay is the overlay install applies: -k, else the build half
// that fits the cluster (openshift: OpenShift serves build.openshift.io).
func installOverlay(opts installOptions, openshift bool) string {
	switch {
	case opts.overlay != "":
		return opts.overlay
	case openshift:
		return filepath.Join(opts.manifests, "openshift-builds")
	}
	return filepath.Join(opts.manifests, "default")
}

// installCRDs is the CRDs' kustomization install applies first: --crds,
// else the overlay's crd/ (exists says whether a directory exists), else
// the custom-builder mode's CRDs for that mode (customMode: the overlay
// holds its webhook), else manifests/crd.
func installCRDs(opts installOptions, overlay string, customMode bool, exists func(string) bool) string {
	switch {
	case opts.crds != "":
		return opts.crds
	case exists(filepath.Join(overlay, "crd")):
		return filepath.Join(overlay, "crd")
	case customMode:
		return filepath.Join(opts.manifests, "openshift-builds", "crd")
	}
	return filepath.Join(opts.manifests, "crd")
}

// isCustomBuilderMode reports whether objs hold the custom-builder mode's
// webhook configuration.
func isCustomBuilderMode(objs []*unstructured.Unstructured) bool {
	return slices.ContainsFunc(objs, func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "ValidatingWebhookConfiguration" && u.GetName() == custombuilds.WebhookConfigurationName
	})
}

// buildComponents are build-controller's components that run archway's
// own Build API.
var buildComponents = []string{"build", "buildconfig", "buildconfig-webhooks"}

// runsBuildComponents reports whether a Deployment runs build-controller
// with one of buildComponents: a container of its image whose
// --controllers names one, or '*' (the default) without disabling them.
func runsBuildComponents(u *unstructured.Unstructured) bool {
	field, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "template", "spec", "containers")
	containers, _ := field.([]any)
	for _, c := range containers {
		m, _ := c.(map[string]any)
		image, _ := m["image"].(string)
		if !strings.Contains(image, "build-controller") {
			continue
		}
		selection := []string{"*"}
		args, _ := m["args"].([]any)
		for _, a := range args {
			if v, ok := strings.CutPrefix(fmt.Sprint(a), "--controllers="); ok {
				selection = strings.Split(v, ",")
			}
		}
		for _, name := range buildComponents {
			if slices.Contains(selection, name) || (slices.Contains(selection, "*") && name != "buildconfig-webhooks" && !slices.Contains(selection, "-"+name)) {
				return true
			}
		}
	}
	return false
}

// checkInstall refuses objects that do not belong on the cluster: where
// OpenShift serves build.openshift.io, a CRD of that group (its API would
// shadow the CRD) and a Deployment running build-controller's build
// components (they would refuse to start: OpenShift's build controller
// runs its Builds); where it does not, the custom-builder mode's webhook
// (no OpenShift build controller would run the Builds it admits).
func checkInstall(objs []*unstructured.Unstructured, openshift bool, where string) error {
	var errs []error
	for _, u := range objs {
		switch {
		case openshift && u.GetKind() == "CustomResourceDefinition" && strings.HasSuffix(u.GetName(), "."+openshiftapi.Group):
			errs = append(errs, fmt.Errorf("%s holds CustomResourceDefinition %s, but OpenShift serves %s on this cluster (its Build capability is on): "+
				"its API would shadow the CRD. Install the custom-builder mode instead: kubectl archway install without -k and --crds "+
				"(manifests/openshift-builds and manifests/openshift-builds/crd), or manifests/openshift/placement for placement and scheduling alone",
				where, u.GetName(), openshiftapi.Group))
		case openshift && u.GetKind() == "Deployment" && runsBuildComponents(u):
			errs = append(errs, fmt.Errorf("%s runs archway's own Build API (Deployment %s runs build-controller's %s components), but OpenShift serves %s on this cluster "+
				"(its Build capability is on): OpenShift's build controller runs its Builds. Install the custom-builder mode instead: kubectl archway install without -k "+
				"(manifests/openshift-builds), or manifests/openshift/placement for placement and scheduling alone",
				where, u.GetName(), strings.Join(buildComponents, ", "), openshiftapi.Group))
		case !openshift && isCustomBuilderMode([]*unstructured.Unstructured{u}):
			errs = append(errs, fmt.Errorf("%s is the custom-builder mode, but OpenShift does not serve %s on this cluster: "+
				"no OpenShift build controller would run its Builds. Install archway's own Build API instead: kubectl archway install without -k "+
				"(manifests/default and manifests/crd)", where, openshiftapi.Group))
		}
	}
	return errors.Join(errs...)
}

// checkArchway refuses kustomizations that are not archway's: the CRDs'
// must hold CRDs alone, and the overlay archway's namespace, so that a
// --manifests or -k pointing elsewhere applies nothing.
func checkArchway(crds, objs []*unstructured.Unstructured, crdDir, overlay string) error {
	var errs []error
	for _, u := range crds {
		if u.GetKind() != "CustomResourceDefinition" {
			errs = append(errs, fmt.Errorf("%s holds %s: --crds must be CRDs alone (e.g. manifests/crd)", crdDir, objectName(u)))
			break
		}
	}
	if !slices.ContainsFunc(objs, func(u *unstructured.Unstructured) bool {
		return u.GetKind() == "Namespace" && u.GetName() == archwayNamespace
	}) {
		errs = append(errs, fmt.Errorf("%s is not an install of archway (it has no Namespace %s): give archway's manifests with --manifests or an install of them with -k", overlay, archwayNamespace))
	}
	return errors.Join(errs...)
}

// archwayNamespace is the namespace every install of archway creates.
const archwayNamespace = "archway-system"

// render builds a kustomization into its objects, in its order.
func render(dir string) ([]*unstructured.Unstructured, error) {
	if !slices.ContainsFunc(konfig.RecognizedKustomizationFileNames(), func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}) {
		return nil, fmt.Errorf("no kustomization at %s: run kubectl archway install from a checkout of archway, "+
			"or give its manifests directory with --manifests, or the install with -k", dir)
	}
	o := krusty.MakeDefaultOptions()
	// Objects in the order the kustomization's sortOptions set, else
	// kustomize's default, as kubectl apply -k applies them.
	o.Reorder = krusty.ReorderOptionUnspecified
	m, err := krusty.MakeKustomizer(o).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range m.Resources() {
		obj, err := r.Map()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out, nil
}

func (o *env) install(ctx context.Context, opts installOptions) error {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	openshift, err := openshiftapi.Serves(dc)
	if err != nil {
		return err
	}
	overlay := installOverlay(opts, openshift)
	who := "archway's CRDs or nothing: installing archway's own Build API"
	if openshift {
		who = "OpenShift (its Build capability is on): installing the custom-builder mode"
	}
	out := o.streams.Out
	_, _ = fmt.Fprintf(out, "build.openshift.io on this cluster: %s\n", who)
	objs, err := render(overlay)
	if err != nil {
		return err
	}
	crdDir := installCRDs(opts, overlay, isCustomBuilderMode(objs), func(dir string) bool {
		info, err := os.Stat(dir)
		return err == nil && info.IsDir()
	})
	crds, err := render(crdDir)
	if err != nil {
		return err
	}
	if err := errors.Join(checkArchway(crds, objs, crdDir, overlay), checkInstall(crds, openshift, crdDir), checkInstall(objs, openshift, overlay)); err != nil {
		return fmt.Errorf("nothing was applied: %w", err)
	}
	if opts.dryRun {
		for _, step := range []struct {
			dir  string
			objs []*unstructured.Unstructured
		}{{crdDir, crds}, {overlay, objs}} {
			_, _ = fmt.Fprintf(out, "would apply %s (%d objects):\n", step.dir, len(step.objs))
			for _, u := range step.objs {
				_, _ = fmt.Fprintf(out, "  %s\n", objectName(u))
			}
		}
		return nil
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(out, "applying %s\n", crdDir)
	if err := o.apply(ctx, dc, dyn, crds, opts.force); err != nil {
		return err
	}
	if err := waitEstablished(ctx, dyn, crds, opts.timeout); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(out, "applying %s\n", overlay)
	if err := o.apply(ctx, dc, dyn, objs, opts.force); err != nil {
		return err
	}
	if isCustomBuilderMode(objs) {
		o.sayBuilderImage(ctx, dyn)
	}
	return nil
}

// sayBuilderImage says what the custom-builder mode still needs when its
// ConfigMap names no builder image by digest: until it does, every
// Custom-strategy build is refused.
func (o *env) sayBuilderImage(ctx context.Context, dyn dynamic.Interface) {
	cm, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(archwayNamespace).Get(ctx, custombuilds.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		return
	}
	image, _, _ := unstructured.NestedString(cm.Object, "data", custombuilds.ImageKey)
	if len(custombuilds.AllowedImages(image)) > 0 {
		return
	}
	_, _ = fmt.Fprintf(o.streams.Out, "ConfigMap %s/%s names no builder image by digest: every Custom-strategy build is refused until it does:\n"+
		"  oc -n %s patch configmap %s -p '{\"data\":{\"image\":\"quay.io/me/builder@sha256:...\"}}'\n",
		archwayNamespace, custombuilds.ConfigMapName, archwayNamespace, custombuilds.ConfigMapName)
}

// objectName is kind/name as kubectl prints it, with the namespace when
// there is one.
func objectName(u *unstructured.Unstructured) string {
	name := strings.ToLower(u.GetKind()) + "/" + u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		name += " -n " + ns
	}
	return name
}

// apply applies objs server-side in order, mapping their kinds from
// discovery read now (so that kinds of CRDs just established resolve).
func (o *env) apply(ctx context.Context, dc discovery.DiscoveryInterface, dyn dynamic.Interface, objs []*unstructured.Unstructured, force bool) error {
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return fmt.Errorf("reading the cluster's API resources: %w", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	// Every kind is mapped before anything is applied: a kind the cluster
	// does not serve (a Kubernetes too old for the install) stops the
	// step with nothing of it applied, not halfway.
	clients := make([]dynamic.ResourceInterface, len(objs))
	var unserved []error
	for i, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			unserved = append(unserved, fmt.Errorf("%s: %w", objectName(u), err))
			continue
		}
		clients[i] = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			clients[i] = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
	}
	if len(unserved) > 0 {
		return fmt.Errorf("the cluster does not serve these kinds, nothing of this step was applied (archway needs Kubernetes 1.30 or later): %w", errors.Join(unserved...))
	}
	for i, u := range objs {
		if _, err := clients[i].Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: installFieldManager, Force: force}); err != nil {
			return fmt.Errorf("applying %s: %w", objectName(u), err)
		}
		_, _ = fmt.Fprintf(o.streams.Out, "%s serverside-applied\n", objectName(u))
	}
	return nil
}

var crdResource = schema.GroupVersionResource{Group: apiextensionsv1.GroupName, Version: "v1", Resource: "customresourcedefinitions"}

// waitEstablished waits until every CRD of objs is Established.
func waitEstablished(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, u := range objs {
		if u.GetKind() != "CustomResourceDefinition" {
			continue
		}
		err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err := dyn.Resource(crdResource).Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // not yet readable: poll again
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == string(apiextensionsv1.Established) && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting %v for CustomResourceDefinition %s to be established: %w", timeout, u.GetName(), err)
		}
	}
	return nil
}
