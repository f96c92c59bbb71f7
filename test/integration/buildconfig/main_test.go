// Package buildconfig holds the bed tests of starting builds from
// BuildConfigs: numbering under concurrent starts (package instantiate), the
// BuildConfig controller (ConfigChange, run policies with the Build
// controller, history limits, lastVersion across restarts) and the SCM
// webhook endpoint, on a real kube-apiserver with kube-controller-manager,
// the scheduler and kwok nodes of four architectures.
package buildconfig

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/build/buildconfig"
	"github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

var (
	suite   *framework.Suite
	testBed *bed.Bed
	k8s     client.Client
	scheme  *runtime.Scheme
)

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Options{
		Name: "buildconfig suite",
		Bed:  bed.Options{ControllerManager: true, WithoutRegistry: true},
		Setup: func(_ context.Context, s *framework.Suite) (func(), error) {
			suite, testBed, k8s, scheme = s, s.Bed, s.Client, s.Scheme
			return nil, nil
		},
	}))
}

// controllers are a manager running the BuildConfig controller and,
// optionally, the Build controller, watching one namespace.
type controllers struct {
	mgr *framework.Manager
	// marks are the framework.HandledMark values on Builds the Build
	// controller read.
	marks *framework.Marks
}

func startControllers(t testing.TB, ns string, withBuild bool) *controllers {
	t.Helper()
	c := &controllers{marks: framework.NewMarks()}
	opts := suite.ManagerOptions(ns)
	opts.NewClient = func(config *rest.Config, options client.Options) (client.Client, error) {
		cl, err := client.NewWithWatch(config, options)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(cl, c.marks.Intercept(interceptor.Funcs{})), nil
	}
	c.mgr = suite.StartManager(t, "controllers", opts, func(ctx context.Context, mgr ctrl.Manager) error {
		starter := instantiate.NewStarter(mgr.GetClient(), mgr.GetAPIReader())
		if err := buildconfig.Setup(mgr, starter, buildconfig.Options{SkipNameValidation: true}); err != nil {
			return err
		}
		if !withBuild {
			return nil
		}
		cfg := &configv1alpha1.BuildControllerConfiguration{Build: configv1alpha1.BuildControllerConfig{BuilderImage: "registry.example.com/archway/builder:test"}}
		configv1alpha1.SetDefaults(cfg)
		return controller.Setup(ctx, mgr, &cfg.Build, controller.Options{Registry: prometheus.NewRegistry(), SkipNameValidation: true})
	})
	return c
}

func (c *controllers) stop() { c.mgr.Stop() }

// harness is one case's namespace and helpers.
type harness struct {
	t   testing.TB
	ctx context.Context
	ns  string
}

func newHarness(t testing.TB, prefix string) *harness {
	t.Helper()
	c := suite.NewCase(t, prefix)
	return &harness{t: t, ctx: c.Ctx, ns: c.NS}
}

// bcObj is a Docker BuildConfig building branch main of a Git repository
// for linux/amd64 and linux/arm64.
func (h *harness) bcObj(name string, policy buildv1.BuildRunPolicy, triggers ...buildv1.BuildTriggerPolicy) *buildv1.BuildConfig {
	return &buildv1.BuildConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: buildv1.BuildConfigSpec{
			RunPolicy: policy,
			Triggers:  triggers,
			CommonSpec: buildv1.CommonSpec{
				Source:    buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: "https://git.example.com/team/app.git", Ref: "main"}},
				Strategy:  buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}},
				Output:    buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/team/app:latest"}},
				Platforms: []string{"linux/amd64", "linux/arm64"},
			},
		},
	}
}

func (h *harness) create(obj client.Object) {
	h.t.Helper()
	if err := k8s.Create(h.ctx, obj); err != nil {
		h.t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
}

func (h *harness) bc(name string) *buildv1.BuildConfig {
	h.t.Helper()
	bc := &buildv1.BuildConfig{}
	if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, bc); err != nil {
		h.t.Fatal(err)
	}
	return bc
}

func (h *harness) build(name string) *buildv1.Build {
	h.t.Helper()
	b := &buildv1.Build{}
	if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, b); err != nil {
		h.t.Fatal(err)
	}
	return b
}

// buildNames lists the namespace's Builds, sorted by name.
func (h *harness) buildNames() []string {
	h.t.Helper()
	var list buildv1.BuildList
	if err := k8s.List(h.ctx, &list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, b := range list.Items {
		if b.DeletionTimestamp == nil {
			names = append(names, b.Name)
		}
	}
	sort.Strings(names)
	return names
}

// waitBuildNames waits until the namespace's Builds are exactly names.
func (h *harness) waitBuildNames(names ...string) {
	h.t.Helper()
	sort.Strings(names)
	var got []string
	err := framework.Poll(h.ctx, bed.DefaultTimeout, func(context.Context) (bool, error) {
		got = h.buildNames()
		return slices.Equal(got, names), nil
	})
	if err != nil {
		h.t.Fatalf("waiting for builds %v: have %v", names, got)
	}
}

func (h *harness) waitBuild(name, what string, done func(*buildv1.Build) bool) *buildv1.Build {
	h.t.Helper()
	b := &buildv1.Build{}
	if err := bed.WaitFor(h.ctx, k8s, client.ObjectKey{Namespace: h.ns, Name: name}, b, done); err != nil {
		h.t.Fatalf("waiting for build %s: %s: %v", name, what, err)
	}
	return b
}

// setPhase writes a Build's phase as its controller would.
func (h *harness) setPhase(name string, phase buildv1.BuildPhase) {
	h.t.Helper()
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
	patch := fmt.Sprintf(`{"status":{"phase":%q}}`, phase)
	if err := k8s.Status().Patch(h.ctx, b, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		h.t.Fatal(err)
	}
}

// waitHandled waits until the Build controller has finished a reconcile of
// Build name as it is now (see framework.Marks.WaitHandled).
func (h *harness) waitHandled(c *controllers, name string) {
	h.t.Helper()
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
	if err := c.marks.WaitHandled(h.ctx, k8s, b); err != nil {
		h.t.Fatal(err)
	}
}

func started(b *buildv1.Build) bool { return len(b.Status.Platforms) > 0 }
