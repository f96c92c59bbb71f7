package report

import (
	"context"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kfields "k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	archwaybuildv1alpha1 "github.com/archway-build/archway/pkg/apis/archwaybuild/v1alpha1"
	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// buildsResource is the Build resource.
var buildsResource = buildv1.GroupVersion.WithResource("builds")

// BuildAPIEnv names the API of the object a build pod reads and reports
// into, when it is not an archway Build: MultiArchBuildAPI, the record a
// custom builder (pkg/build/custom) keeps of an OpenShift Build, whose spec
// and status have the Build's shape. Any other value is refused.
const BuildAPIEnv = "ARCHWAY_BUILD_API"

// MultiArchBuildAPI is BuildAPIEnv's value for a MultiArchBuild.
const MultiArchBuildAPI = "multiarchbuilds.v1alpha1.build.archway.dev"

// buildAPI returns the resource and kind $ARCHWAY_BUILD_API names.
func buildAPI() (schema.GroupVersionResource, string, error) {
	switch v := os.Getenv(BuildAPIEnv); v {
	case "":
		return buildsResource, "Build", nil
	case MultiArchBuildAPI:
		return archwaybuildv1alpha1.Resource, "MultiArchBuild", nil
	default:
		return schema.GroupVersionResource{}, "", fmt.Errorf("$%s is %q: it may only be %s", BuildAPIEnv, v, MultiArchBuildAPI)
	}
}

// Client reads, watches and writes the status of Builds with client-go's
// dynamic client.
//
// It exists so that the builder binary links neither controller-runtime's
// client nor client-go's typed clientsets: those register every Kubernetes
// API type at init, and every build step runs the builder binary again
// (buildah's chroot isolation, copier and untar helpers re-execute it, after
// copying it into memory), so their init time and size are paid dozens of
// times per build.
type Client struct {
	builds dynamic.NamespaceableResourceInterface
	// apiVersion and kind are the object's (a Build unless BuildAPIEnv
	// says otherwise).
	apiVersion, kind string
}

// NewClient connects with a kubeconfig file, or with $KUBECONFIG,
// ~/.kube/config, or in a pod its service account, in that order when
// kubeconfig is empty. userAgent names the program in the apiserver's logs.
func NewClient(kubeconfig, userAgent string) (*Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("connecting to the apiserver: %w", err)
	}
	return NewClientForConfig(cfg, userAgent)
}

// NewClientForConfig returns a Client for a rest.Config.
func NewClientForConfig(cfg *rest.Config, userAgent string) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = userAgent
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the apiserver: %w", err)
	}
	res, kind, err := buildAPI()
	if err != nil {
		return nil, err
	}
	return &Client{builds: dyn.Resource(res), apiVersion: res.GroupVersion().String(), kind: kind}, nil
}

// Get reads a Build.
func (c *Client) Get(ctx context.Context, key types.NamespacedName) (*buildv1.Build, error) {
	u, err := c.builds.Namespace(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return BuildFromUnstructured(u)
}

// ListWatch lists and watches the one Build (a field selector on its
// name), with bookmarks, for client-go's informers and watch tools. Lists
// and watches carry *unstructured.Unstructured objects (see
// BuildFromUnstructured).
func (c *Client) ListWatch(key types.NamespacedName) cache.ListerWatcher {
	builds := c.builds.Namespace(key.Namespace)
	selector := kfields.OneTermEqualSelector("metadata.name", key.Name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return builds.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector, opts.AllowWatchBookmarks = selector, true
			return builds.Watch(ctx, opts)
		},
	}
}

// ApplyStatus server-side applies status (the fields to own, as JSON
// values) to the Build's status subresource as manager, forcing ownership
// of those fields.
func (c *Client) ApplyStatus(ctx context.Context, key types.NamespacedName, manager string, status map[string]any) error {
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetAPIVersion(c.apiVersion)
	u.SetKind(c.kind)
	u.SetNamespace(key.Namespace)
	u.SetName(key.Name)
	_, err := c.builds.Namespace(key.Namespace).ApplyStatus(ctx, key.Name, u,
		metav1.ApplyOptions{FieldManager: manager, Force: true})
	return err
}

// BuildFromUnstructured converts an object the dynamic client returned
// into a Build.
func BuildFromUnstructured(u *unstructured.Unstructured) (*buildv1.Build, error) {
	b := &buildv1.Build{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b); err != nil {
		return nil, fmt.Errorf("reading Build %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return b, nil
}
