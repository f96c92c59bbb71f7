// Package build holds the integration tests of the Build controller on the
// bed: a real kube-apiserver and etcd, the real kube-scheduler, kwok nodes of
// four architectures and kube-controller-manager (garbage collection). Each
// case starts its own controller, watching only the case's namespace, with
// the case's configuration, and plays the builders' part itself: it reports
// pods Running and finished as a kubelet would and writes each platform's
// status entry with server-side apply as `builder docker-build` does.
package build

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	buildcontroller "github.com/archway-build/archway/pkg/build/controller"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

// The bed every case of this package shares, its client and scheme.
var (
	suite   *framework.Suite
	testBed *bed.Bed
	k8s     client.Client
	scheme  *runtime.Scheme
)

const builderImage = "registry.example.com/archway/builder:test"

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Options{
		Name: "build suite",
		Bed:  bed.Options{ControllerManager: true},
		Setup: func(_ context.Context, s *framework.Suite) (func(), error) {
			suite, testBed, k8s, scheme = s, s.Bed, s.Client, s.Scheme
			return nil, nil
		},
	}))
}

// testConfig is the controller configuration of a case: the test builder
// image and the defaults, changed by mut.
func testConfig(mut func(*configv1alpha1.BuildControllerConfig)) *configv1alpha1.BuildControllerConfig {
	cfg := &configv1alpha1.BuildControllerConfiguration{Build: configv1alpha1.BuildControllerConfig{BuilderImage: builderImage}}
	cfg.APIVersion, cfg.Kind = configv1alpha1.GroupVersion.String(), configv1alpha1.Kind
	if mut != nil {
		mut(&cfg.Build)
	}
	configv1alpha1.SetDefaults(cfg)
	if errs := configv1alpha1.Validate(cfg); len(errs) > 0 {
		panic(errs.ToAggregate())
	}
	return &cfg.Build
}

// controller is a Build controller started by a test.
type controller struct {
	mgr      *framework.Manager
	registry *prometheus.Registry
	// marks are the framework.HandledMark values on Builds the controller
	// read.
	marks *framework.Marks
}

// startController runs the Build controller in this process, watching only
// namespace ns.
func startController(t testing.TB, ns string, cfg *configv1alpha1.BuildControllerConfig) *controller {
	t.Helper()
	return startControllerWith(t, ns, cfg, nil)
}

// startControllerWith is startController with the controller's client
// wrapped by funcs (nil: not wrapped), to inject failures.
func startControllerWith(t testing.TB, ns string, cfg *configv1alpha1.BuildControllerConfig, funcs *interceptor.Funcs) *controller {
	t.Helper()
	return startControllerOptions(t, ns, cfg, funcs, buildcontroller.Options{})
}

// startControllerOptions is startControllerWith with the controller's
// options (its metrics registry and name validation are the test's).
func startControllerOptions(t testing.TB, ns string, cfg *configv1alpha1.BuildControllerConfig, funcs *interceptor.Funcs, bopts buildcontroller.Options) *controller {
	t.Helper()
	opts := suite.ManagerOptions(ns)
	buildcontroller.ConfigureCache(&opts.Cache)
	c := &controller{registry: prometheus.NewRegistry(), marks: framework.NewMarks()}
	wrapped := interceptor.Funcs{}
	if funcs != nil {
		wrapped = *funcs
	}
	wrapped = c.marks.Intercept(wrapped)
	opts.NewClient = func(config *rest.Config, options client.Options) (client.Client, error) {
		cl, err := client.NewWithWatch(config, options)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(cl, wrapped), nil
	}
	bopts.Registry, bopts.SkipNameValidation = c.registry, true
	c.mgr = suite.StartManager(t, "build controller", opts, func(ctx context.Context, mgr ctrl.Manager) error {
		return buildcontroller.Setup(ctx, mgr, cfg, bopts)
	})
	return c
}

// stop stops the controller and waits until it has stopped.
func (c *controller) stop() { c.mgr.Stop() }

// harness is one case's namespace, Build and helpers.
type harness struct {
	t     *testing.T
	ctx   context.Context
	ns    string
	build string
	ctrl  *controller
	cfg   *configv1alpha1.BuildControllerConfig
}

func newHarness(t *testing.T, prefix string) *harness {
	t.Helper()
	c := suite.NewCase(t, prefix)
	return &harness{t: t, ctx: c.Ctx, ns: c.NS}
}

// buildObj returns a Docker build of name in the case's namespace pushing to
// the test registry name, with platforms.
func (h *harness) buildObj(name string, platforms ...string) *buildv1.Build {
	return &buildv1.Build{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: buildv1.BuildSpec{CommonSpec: buildv1.CommonSpec{
			Source:    buildv1.BuildSource{Type: buildv1.BuildSourceDockerfile, Dockerfile: ptr.To("FROM busybox\nRUN uname -m > /arch\n")},
			Strategy:  buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType},
			Output:    buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/team/app:v1"}},
			Platforms: platforms,
		}},
	}
}

func (h *harness) create(b *buildv1.Build) {
	h.t.Helper()
	h.build = b.Name
	if err := k8s.Create(h.ctx, b); err != nil {
		h.t.Fatalf("creating build %s: %v", b.Name, err)
	}
}

// get reads the case's Build.
func (h *harness) get() *buildv1.Build {
	h.t.Helper()
	b := &buildv1.Build{}
	if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: h.build}, b); err != nil {
		h.t.Fatal(err)
	}
	return b
}

// waitBuild waits until the Build satisfies done, failing with what was
// awaited and the Build's last state.
func (h *harness) waitBuild(what string, done func(*buildv1.Build) bool) *buildv1.Build {
	h.t.Helper()
	b := &buildv1.Build{}
	if err := bed.WaitFor(h.ctx, k8s, client.ObjectKey{Namespace: h.ns, Name: h.build}, b, done); err != nil {
		h.t.Fatalf("waiting for the build: %s: %v", what, err)
	}
	return b
}

// waitPhase waits for the Build's phase and reason.
func (h *harness) waitPhase(phase buildv1.BuildPhase, reason buildv1.StatusReason) *buildv1.Build {
	h.t.Helper()
	return h.waitBuild(fmt.Sprintf("phase %s, reason %q", phase, reason), func(b *buildv1.Build) bool {
		return b.Status.Phase == phase && b.Status.Reason == reason
	})
}

// waitHandled waits until the controller has finished a reconcile of the
// Build as it is now, so that what that reconcile did not do can be checked
// (see framework.Marks.WaitHandled).
func (h *harness) waitHandled() {
	h.t.Helper()
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: h.build}}
	if err := h.ctrl.marks.WaitHandled(h.ctx, k8s, b); err != nil {
		h.t.Fatal(err)
	}
}

// withManifestListPod returns names and, when the Build's pod-name
// annotation names its manifest-list pod (written with the platform pods,
// beside which that pod is created), that pod.
func (h *harness) withManifestListPod(names []string) []string {
	h.t.Helper()
	ml := buildv1.ManifestListPodName(h.build)
	b := h.waitBuild("pod-name annotation", func(b *buildv1.Build) bool { return b.Annotations[buildv1.BuildPodNameAnnotation] != "" })
	if b.Annotations[buildv1.BuildPodNameAnnotation] == ml && !slices.Contains(names, ml) {
		return append(slices.Clone(names), ml)
	}
	return names
}

// pods lists the case's pods of the Build, by name.
func (h *harness) pods() map[string]*corev1.Pod {
	h.t.Helper()
	var list corev1.PodList
	if err := k8s.List(h.ctx, &list, client.InNamespace(h.ns), client.MatchingLabels{buildv1.BuildLabel: buildv1.LabelValue(h.build)}); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// waitPodNames waits until the Build's pods are exactly names.
func (h *harness) waitPodNames(names ...string) map[string]*corev1.Pod {
	h.t.Helper()
	slices.Sort(names)
	var got []string
	var pods map[string]*corev1.Pod
	err := framework.Poll(h.ctx, bed.DefaultTimeout, func(context.Context) (bool, error) {
		pods = h.pods()
		got = got[:0]
		for n := range pods {
			got = append(got, n)
		}
		slices.Sort(got)
		return slices.Equal(got, names), nil
	})
	if err != nil {
		h.t.Fatalf("waiting for pods %v: have %v", names, got)
	}
	return pods
}

// pod reads one pod.
func (h *harness) pod(name string) *corev1.Pod {
	h.t.Helper()
	p := &corev1.Pod{}
	if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: name}, p); err != nil {
		h.t.Fatal(err)
	}
	return p
}

// platformPod is the pod name of one platform of the case's Build.
func (h *harness) platformPod(p string) string { return buildv1.PlatformPodName(h.build, p) }

// applyEntry writes one platform's status entry with server-side apply, as
// `builder docker-build` does: its own field manager, only its entry.
func (h *harness) applyEntry(p string, fields map[string]any) {
	h.t.Helper()
	entry := map[string]any{"platform": p}
	for k, v := range fields {
		entry[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": buildv1.GroupVersion.String(), "kind": "Build",
		"metadata": map[string]any{"name": h.build, "namespace": h.ns},
		"status":   map[string]any{"platforms": []any{entry}},
	}}
	err := k8s.Status().Apply(h.ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner("archway-builder-"+strings.ReplaceAll(p, "/", "-")), client.ForceOwnership)
	if err != nil {
		h.t.Fatalf("applying the entry of %s: %v", p, err)
	}
}

// startPlatform plays a platform's pod starting: the kubelet reports it
// Running and the builder writes phase Running.
func (h *harness) startPlatform(p string) {
	h.t.Helper()
	if err := testBed.SetPodRunning(h.ctx, h.pod(h.platformPod(p))); err != nil {
		h.t.Fatal(err)
	}
	h.applyEntry(p, map[string]any{"phase": "Running", "startTimestamp": metav1.Now().UTC().Format(time.RFC3339)})
}

// digestOf is the fake image digest a platform's builder reports.
func digestOf(p string) string {
	return "sha256:" + fmt.Sprintf("%064x", len(p)*7919+int(p[len(p)-1]))
}

// succeedPlatform plays a platform's builder succeeding: it writes Complete
// with its image's digest and platform, then its pod exits 0.
func (h *harness) succeedPlatform(p string) {
	h.t.Helper()
	parts := strings.Split(p, "/")
	out := map[string]any{"imageDigest": digestOf(p), "os": parts[0], "architecture": parts[1]}
	h.applyEntry(p, map[string]any{
		"phase": "Complete", "completionTimestamp": metav1.Now().UTC().Format(time.RFC3339),
		"outputDockerImageReference": "registry.example.com/team/app:v1-" + strings.ReplaceAll(p, "/", "-"),
		"output":                     out,
	})
	if err := testBed.SetPodFinished(h.ctx, h.pod(h.platformPod(p)), 0, "", ""); err != nil {
		h.t.Fatal(err)
	}
}

// failPlatform plays a platform's builder failing: it writes Failed with
// DockerBuildFailed, then its pod exits 1.
func (h *harness) failPlatform(p string) {
	h.t.Helper()
	h.applyEntry(p, map[string]any{"phase": "Failed", "reason": "DockerBuildFailed",
		"message": "RUN uname -m > /arch: exit status 1", "completionTimestamp": metav1.Now().UTC().Format(time.RFC3339)})
	if err := testBed.SetPodFinished(h.ctx, h.pod(h.platformPod(p)), 1, "Error", "DockerBuildFailed: RUN uname -m > /arch: exit status 1"); err != nil {
		h.t.Fatal(err)
	}
}

// finishPod reports a pod ended, as its kubelet would.
func (h *harness) finishPod(name string, exitCode int32, message string) {
	h.t.Helper()
	if err := testBed.SetPodFinished(h.ctx, h.pod(name), exitCode, "", message); err != nil {
		h.t.Fatal(err)
	}
}

// entries returns the Build's status.platforms by platform.
func entries(b *buildv1.Build) map[string]buildv1.BuildStatusPlatform {
	out := map[string]buildv1.BuildStatusPlatform{}
	for _, e := range b.Status.Platforms {
		out[e.Platform] = e
	}
	return out
}

// events returns the reasons of the events recorded on the case's Build.
func (h *harness) events() []string {
	h.t.Helper()
	var list corev1.EventList
	if err := k8s.List(h.ctx, &list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Build" && e.InvolvedObject.Name == h.build {
			out = append(out, e.Reason)
		}
	}
	slices.Sort(out)
	return out
}

// waitEvents waits until the Build has events with every reason.
func (h *harness) waitEvents(reasons ...string) {
	h.t.Helper()
	var got []string
	err := framework.Poll(h.ctx, bed.DefaultTimeout, func(context.Context) (bool, error) {
		got = h.events()
		for _, r := range reasons {
			if !slices.Contains(got, r) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		h.t.Fatalf("waiting for events %v on the build: have %v", reasons, got)
	}
}
