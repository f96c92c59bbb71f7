// Package imagetrigger holds the bed tests of BuildConfigs' ImageChange
// triggers (package imagechange): a real kube-apiserver, the bed's real
// CNCF Distribution registries (one open, one with basic auth), and the
// trigger controller polling them, with the BuildConfig controller where a
// case needs its ConfigChange build.
package imagetrigger

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/buildconfig"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/trigger/imagechange"
	"github.com/archway-build/archway/pkg/placement/image"
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
		Name: "imagetrigger suite",
		Bed:  bed.Options{WithoutNodes: true, AuthRegistry: true},
		Setup: func(_ context.Context, s *framework.Suite) (func(), error) {
			suite, testBed, k8s, scheme = s, s.Bed, s.Client, s.Scheme
			return nil, nil
		},
	}))
}

// pollInterval is the trigger's poll interval in these tests.
const pollInterval = 500 * time.Millisecond

// trigger is a running trigger controller (and, optionally, the
// BuildConfig controller) watching one namespace, counting its polls into
// a registry of its own.
type trigger struct {
	mgr     *framework.Manager
	metrics *prometheus.Registry
}

func startTrigger(t testing.TB, ns string, withBuildConfig bool) *trigger {
	t.Helper()
	tr := &trigger{metrics: prometheus.NewRegistry()}
	tr.mgr = suite.StartManager(t, "trigger", suite.ManagerOptions(ns), func(_ context.Context, mgr ctrl.Manager) error {
		starter := instantiate.NewStarter(mgr.GetClient(), mgr.GetAPIReader())
		if withBuildConfig {
			if err := buildconfig.Setup(mgr, starter, buildconfig.Options{SkipNameValidation: true}); err != nil {
				return err
			}
		}
		resolver := image.NewRemote(image.RemoteOptions{Timeout: 10 * time.Second, UserAgent: "archway-test"})
		return imagechange.Setup(mgr, starter, resolver, imagechange.Options{
			Interval: pollInterval, BuilderServiceAccount: "builder", Registry: tr.metrics, SkipNameValidation: true,
		})
	})
	return tr
}

func (tr *trigger) stop() { tr.mgr.Stop() }

// polls is how many polls ended with result.
func (tr *trigger) polls(t testing.TB, result string) int {
	t.Helper()
	families, err := tr.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "archway_imagechange_trigger_polls_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return int(m.GetCounter().GetValue())
				}
			}
		}
	}
	return 0
}

// waitPolls waits for n more polls ending with result than there were: the
// positive signal a check that nothing happened waits for.
func (tr *trigger) waitPolls(t testing.TB, ctx context.Context, result string, n int) {
	t.Helper()
	want := tr.polls(t, result) + n
	err := framework.Poll(ctx, bed.LongTimeout, func(context.Context) (bool, error) {
		return tr.polls(t, result) >= want, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d %q polls (have %d): %v", want, result, tr.polls(t, result), err)
	}
}

// harness is one case's namespace.
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

// bcObj is a Docker BuildConfig built on base (the strategy's from) with
// an ImageChange trigger and the triggers given.
func (h *harness) bcObj(name, base string, triggers ...buildv1.BuildTriggerPolicy) *buildv1.BuildConfig {
	return &buildv1.BuildConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.ns},
		Spec: buildv1.BuildConfigSpec{
			Triggers: append([]buildv1.BuildTriggerPolicy{{Type: buildv1.ImageChangeBuildTriggerType, ImageChange: &buildv1.ImageChangeTrigger{}}}, triggers...),
			CommonSpec: buildv1.CommonSpec{
				Source: buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: "https://git.example.com/team/app.git"}},
				Strategy: buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{
					From: &corev1.ObjectReference{Kind: "DockerImage", Name: base}}},
				Output: buildv1.BuildOutput{To: &corev1.ObjectReference{Kind: "DockerImage", Name: testBed.Registry.Host + "/team/app:latest"}},
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

// builds lists the namespace's Builds.
func (h *harness) builds() []buildv1.Build {
	h.t.Helper()
	var list buildv1.BuildList
	if err := k8s.List(h.ctx, &list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	// By name: one BuildConfig's builds in the order of their numbers
	// (fewer than ten here).
	slices.SortFunc(list.Items, func(a, b buildv1.Build) int { return strings.Compare(a.Name, b.Name) })
	return list.Items
}

// waitBuilds waits until the namespace has n Builds and returns them.
func (h *harness) waitBuilds(n int) []buildv1.Build {
	h.t.Helper()
	var got []buildv1.Build
	err := framework.Poll(h.ctx, bed.LongTimeout, func(context.Context) (bool, error) {
		got = h.builds()
		return len(got) >= n, nil
	})
	if err != nil {
		h.dump()
		h.t.Fatalf("waiting for %d builds (have %d): %v", n, len(got), err)
	}
	return got
}

// dump logs what the trigger controller left in the namespace: each
// BuildConfig's lastVersion and trigger record, and every event, so that
// a build that never came says why.
func (h *harness) dump() {
	h.t.Helper()
	var bcs buildv1.BuildConfigList
	if err := k8s.List(context.WithoutCancel(h.ctx), &bcs, client.InNamespace(h.ns)); err != nil {
		h.t.Logf("listing BuildConfigs: %v", err)
	}
	for _, bc := range bcs.Items {
		h.t.Logf("BuildConfig %s: lastVersion %d, imageChangeTriggers %+v", bc.Name, bc.Status.LastVersion, bc.Status.ImageChangeTriggers)
	}
	var events corev1.EventList
	if err := k8s.List(context.WithoutCancel(h.ctx), &events, client.InNamespace(h.ns)); err != nil {
		h.t.Logf("listing events: %v", err)
	}
	for _, e := range events.Items {
		h.t.Logf("event %s %s/%s %s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
}

// events returns the messages of the events with reason recorded on
// BuildConfig name.
func (h *harness) events(name, reason string) []string {
	h.t.Helper()
	var list corev1.EventList
	if err := k8s.List(h.ctx, &list, client.InNamespace(h.ns)); err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "BuildConfig" && e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }
