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
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	"github.com/archway-build/archway/pkg/build/buildconfig"
	"github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/test/bed"
)

var (
	testBed *bed.Bed
	k8s     client.Client
	scheme  *runtime.Scheme
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bed.SetTestLogger()
	ctx := context.Background()
	var err error
	testBed, err = bed.Start(ctx, bed.Options{ControllerManager: true, WithoutRegistry: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = testBed.Stop() }()
	scheme = bed.NewScheme()
	utilruntime.Must(buildv1.AddToScheme(scheme))
	if k8s, err = client.New(testBed.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// controllers are a manager running the BuildConfig controller and,
// optionally, the Build controller, watching one namespace.
type controllers struct {
	cancel context.CancelFunc
	done   chan error

	mu    sync.Mutex
	marks map[string]bool // handledMark values on Builds the Build controller read
}

// handledMark is an annotation a test sets on a Build to learn when the
// Build controller has read the Build as it is now.
const handledMark = "test.archway.dev/handled-mark"

func startControllers(t testing.TB, ns string, withBuild bool) *controllers {
	t.Helper()
	c := &controllers{done: make(chan error, 1), marks: map[string]bool{}}
	opts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		NewClient: func(config *rest.Config, options client.Options) (client.Client, error) {
			cl, err := client.NewWithWatch(config, options)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(cl, interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				err := cl.Get(ctx, key, obj, opts...)
				if b, ok := obj.(*buildv1.Build); ok && err == nil && b.Annotations[handledMark] != "" {
					c.mu.Lock()
					c.marks[b.Annotations[handledMark]] = true
					c.mu.Unlock()
				}
				return err
			}}), nil
		},
	}
	mgr, err := ctrl.NewManager(testBed.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	starter := instantiate.NewStarter(mgr.GetClient(), mgr.GetAPIReader())
	if err := buildconfig.Setup(mgr, starter, buildconfig.Options{SkipNameValidation: true}); err != nil {
		t.Fatal(err)
	}
	if withBuild {
		cfg := &configv1alpha1.BuildControllerConfiguration{Build: configv1alpha1.BuildControllerConfig{BuilderImage: "registry.example.com/archway/builder:test"}}
		configv1alpha1.SetDefaults(cfg)
		if err := controller.Setup(ctx, mgr, &cfg.Build, controller.Options{Registry: prometheus.NewRegistry(), SkipNameValidation: true}); err != nil {
			t.Fatal(err)
		}
	}
	go func() { c.done <- mgr.Start(ctx) }()
	t.Cleanup(c.stop)
	return c
}

func (c *controllers) stop() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	if err := <-c.done; err != nil {
		fmt.Fprintln(os.Stderr, "controllers stopped:", err)
	}
	c.cancel = nil
}

func (c *controllers) sawMark(mark string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.marks[mark]
}

// harness is one case's namespace and helpers.
type harness struct {
	t     testing.TB
	ctx   context.Context
	ns    string
	marks int
}

func newHarness(t testing.TB, prefix string) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	ns, err := testBed.CreateNamespace(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: ctx, ns: ns}
	t.Cleanup(func() {
		var pods corev1.PodList
		if err := k8s.List(context.Background(), &pods, client.InNamespace(ns)); err == nil {
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					_ = testBed.SetPodFinished(context.Background(), p, 137, "Error", "test ended")
				}
			}
		}
		_ = k8s.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	return h
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
	err := wait.PollUntilContextTimeout(h.ctx, 20*time.Millisecond, bed.DefaultTimeout, true, func(context.Context) (bool, error) {
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
// Build name as it is now (see the build suite's waitHandled).
func (h *harness) waitHandled(c *controllers, name string) {
	h.t.Helper()
	for range 2 {
		h.marks++
		mark := fmt.Sprintf("%s-%d", name, h.marks)
		b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
		patch := []byte(`{"metadata":{"annotations":{"` + handledMark + `":"` + mark + `"}}}`)
		if err := k8s.Patch(h.ctx, b, client.RawPatch(types.MergePatchType, patch)); err != nil {
			h.t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(h.ctx, 10*time.Millisecond, bed.DefaultTimeout, true, func(context.Context) (bool, error) {
			return c.sawMark(mark), nil
		})
		if err != nil {
			h.t.Fatalf("the Build controller never reconciled %s marked %s", name, mark)
		}
	}
}

func started(b *buildv1.Build) bool { return len(b.Status.Platforms) > 0 }
