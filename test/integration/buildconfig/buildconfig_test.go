package buildconfig

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
)

// TestConcurrentStartsNumbering: 20 starts at once, each through its own
// Starter (as 20 processes would), give app-1..app-20, no gap, no
// duplicate, and lastVersion 20.
func TestConcurrentStartsNumbering(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "numbering")
	h.create(h.bcObj("app", buildv1.BuildRunPolicyParallel))
	const n = 20
	var wg sync.WaitGroup
	names := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			s := instantiate.NewStarter(k8s, nil)
			b, err := s.Start(h.ctx, h.ns, "app", instantiate.Request{TriggeredBy: []buildv1.BuildTriggerCause{{Message: instantiate.CauseManual}}})
			errs[i] = err
			if err == nil {
				names[i] = b.Name
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, name := range names {
		if seen[name] {
			t.Errorf("two starts returned %s", name)
		}
		seen[name] = true
	}
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, "app-"+strconv.Itoa(i))
	}
	h.waitBuildNames(want...)
	if lv := h.bc("app").Status.LastVersion; lv != n {
		t.Errorf("status.lastVersion = %d, want %d", lv, n)
	}
	b := h.build("app-7")
	if b.Annotations[buildv1.BuildNumberAnnotation] != "7" || b.Labels[buildv1.BuildConfigLabel] != "app" || b.Labels["buildconfig"] != "app" ||
		b.Labels[buildv1.BuildRunPolicyLabel] != "Parallel" || len(b.OwnerReferences) != 1 || b.OwnerReferences[0].UID != h.bc("app").UID ||
		len(b.Spec.TriggeredBy) != 1 || b.Spec.TriggeredBy[0].Message != "Manually triggered" {
		t.Errorf("app-7: labels %v, annotations %v, owners %v, triggeredBy %v", b.Labels, b.Annotations, b.OwnerReferences, b.Spec.TriggeredBy)
	}
}

// TestPlatformOverrideValidatedByTheAPI: a bad override is refused with the
// CRD's own message, and takes no number.
func TestPlatformOverrideValidatedByTheAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "override")
	h.create(h.bcObj("app", buildv1.BuildRunPolicyParallel))
	s := instantiate.NewStarter(k8s, nil)
	cases := []struct {
		req  instantiate.Request
		want string
	}{
		{instantiate.Request{Platforms: []string{"Linux/ARM64"}}, `"Linux/ARM64": use lowercase ("linux/arm64")`},
		{instantiate.Request{Platforms: []string{"linux/arm64", "linux/arm64/v8"}}, `"linux/arm64/v8" is the same platform as "linux/arm64"; remove one of them`},
		{instantiate.Request{Platforms: []string{"linux/amd64"}, PlatformsAllowedToFail: []string{"linux/s390x"}}, `"linux/s390x" is not in platforms; platformsAllowedToFail must be a subset of platforms`},
	}
	for _, tc := range cases {
		_, err := s.Start(h.ctx, h.ns, "app", tc.req)
		if !apierrors.IsInvalid(err) || !containsMessage(err, tc.want) {
			t.Errorf("Start(%+v) = %v, want Invalid with %q", tc.req, err, tc.want)
		}
	}
	b, err := s.Start(h.ctx, h.ns, "app", instantiate.Request{Platforms: []string{"linux/s390x", "linux/ppc64le"}, PlatformsAllowedToFail: []string{"linux/s390x"}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "app-1" || fmt.Sprint(h.build("app-1").Spec.Platforms) != "[linux/s390x linux/ppc64le]" {
		t.Errorf("valid override: %s with %v, want app-1 (the refused ones took no number)", b.Name, h.build("app-1").Spec.Platforms)
	}
}

func containsMessage(err error, msg string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if contains(c.Message, msg) {
			return true
		}
	}
	return contains(status.Status().Message, msg)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestConfigChange: a BuildConfig with a ConfigChange trigger gets build 1
// when it is created, and a restarted controller starts no second one.
func TestConfigChange(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "configchange")
	c := startControllers(t, h.ns, false)
	h.create(h.bcObj("app", buildv1.BuildRunPolicySerial, buildv1.BuildTriggerPolicy{Type: buildv1.ConfigChangeBuildTriggerType}))
	b := h.waitBuild("app-1", "created by the ConfigChange trigger", func(*buildv1.Build) bool { return true })
	if len(b.Spec.TriggeredBy) != 1 || b.Spec.TriggeredBy[0].Message != "Build configuration change" {
		t.Errorf("triggeredBy %+v", b.Spec.TriggeredBy)
	}
	c.stop()
	startControllers(t, h.ns, false)
	// The restarted controller has handled the namespace once a BuildConfig
	// created after it started has its build.
	h.create(h.bcObj("other", buildv1.BuildRunPolicySerial, buildv1.BuildTriggerPolicy{Type: buildv1.ConfigChangeBuildTriggerType}))
	h.waitBuild("other-1", "created by the restarted controller", func(*buildv1.Build) bool { return true })
	h.waitBuildNames("app-1", "other-1")
	if lv := h.bc("app").Status.LastVersion; lv != 1 {
		t.Errorf("app lastVersion %d, want 1", lv)
	}
}

// TestLastVersionFollowsBuilds: Builds numbered past status.lastVersion
// (restored from a backup) raise it, so the next start numbers after them.
func TestLastVersionFollowsBuilds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "lastversion")
	h.create(h.bcObj("app", buildv1.BuildRunPolicyParallel))
	bc := h.bc("app")
	restored := instantiate.NewBuild(bc, 7, instantiate.Request{})
	h.create(restored)
	startControllers(t, h.ns, false)
	if err := bedWait(h, func() bool { return h.bc("app").Status.LastVersion == 7 }); err != nil {
		t.Fatalf("lastVersion %d, want 7: %v", h.bc("app").Status.LastVersion, err)
	}
	b, err := instantiate.NewStarter(k8s, nil).Start(h.ctx, h.ns, "app", instantiate.Request{})
	if err != nil || b.Name != "app-8" {
		t.Fatalf("next start: %v, %v; want app-8", b, err)
	}
}

// TestHistoryLimits: the oldest ended builds beyond
// successfulBuildsHistoryLimit and failedBuildsHistoryLimit are deleted;
// running builds never are.
func TestHistoryLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "history")
	bc := h.bcObj("app", buildv1.BuildRunPolicyParallel)
	bc.Spec.SuccessfulBuildsHistoryLimit = ptr.To[int32](2)
	bc.Spec.FailedBuildsHistoryLimit = ptr.To[int32](1)
	h.create(bc)
	s := instantiate.NewStarter(k8s, nil)
	phases := []buildv1.BuildPhase{
		buildv1.BuildPhaseComplete, buildv1.BuildPhaseFailed, buildv1.BuildPhaseComplete, buildv1.BuildPhaseCancelled,
		buildv1.BuildPhaseComplete, buildv1.BuildPhaseRunning, buildv1.BuildPhaseError, buildv1.BuildPhaseComplete,
	}
	for range phases {
		if _, err := s.Start(h.ctx, h.ns, "app", instantiate.Request{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range phases {
		h.setPhase("app-"+strconv.Itoa(i+1), p)
	}
	startControllers(t, h.ns, false)
	// Kept: the two newest Complete (5, 8), the newest failed (7, Error),
	// and the Running one (6).
	h.waitBuildNames("app-5", "app-6", "app-7", "app-8")
}

// TestRunPolicySerial: build 2 stays New, unstarted, while build 1 runs, and
// starts when it ends.
func TestRunPolicySerial(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "serial")
	c := startControllers(t, h.ns, true)
	h.create(h.bcObj("app", buildv1.BuildRunPolicySerial))
	s := instantiate.NewStarter(k8s, nil)
	for range 2 {
		if _, err := s.Start(h.ctx, h.ns, "app", instantiate.Request{}); err != nil {
			t.Fatal(err)
		}
	}
	h.waitBuild("app-1", "started", started)
	const queued = "Waiting for build app-1 to end (runPolicy Serial)."
	h.waitBuild("app-2", "queued with a message", func(b *buildv1.Build) bool { return b.Status.Message == queued })
	h.waitHandled(c, "app-2")
	if b := h.build("app-2"); started(b) || b.Status.Phase != buildv1.BuildPhaseNew {
		t.Fatalf("app-2 started while app-1 runs (Serial): phase %s, platforms %v", b.Status.Phase, b.Status.Platforms)
	}
	cancel(h, "app-1")
	h.waitBuild("app-1", "cancelled", func(b *buildv1.Build) bool { return b.Status.Phase == buildv1.BuildPhaseCancelled })
	h.waitBuild("app-2", "started once app-1 ended", started)
	if msg := h.build("app-2").Status.Message; msg == queued {
		t.Errorf("app-2 started and still says %q", msg)
	}
}

// TestRunPolicySerialLatestOnly: with build 1 running, queued builds 2 and
// 3 wait; 2 is cancelled, and 3 starts when 1 ends.
func TestRunPolicySerialLatestOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "latestonly")
	c := startControllers(t, h.ns, true)
	h.create(h.bcObj("app", buildv1.BuildRunPolicySerialLatestOnly))
	s := instantiate.NewStarter(k8s, nil)
	if _, err := s.Start(h.ctx, h.ns, "app", instantiate.Request{}); err != nil {
		t.Fatal(err)
	}
	h.waitBuild("app-1", "started", started)
	for range 2 {
		if _, err := s.Start(h.ctx, h.ns, "app", instantiate.Request{}); err != nil {
			t.Fatal(err)
		}
	}
	h.waitBuild("app-2", "cancelled as an older queued build", func(b *buildv1.Build) bool { return b.Status.Phase == buildv1.BuildPhaseCancelled })
	h.waitHandled(c, "app-3")
	if b := h.build("app-3"); started(b) {
		t.Fatalf("app-3 started while app-1 runs (SerialLatestOnly)")
	}
	cancel(h, "app-1")
	h.waitBuild("app-3", "started once app-1 ended", started)
}

// TestRunPolicyParallel: builds start at once.
func TestRunPolicyParallel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "parallel")
	startControllers(t, h.ns, true)
	h.create(h.bcObj("app", buildv1.BuildRunPolicyParallel))
	s := instantiate.NewStarter(k8s, nil)
	for range 3 {
		if _, err := s.Start(h.ctx, h.ns, "app", instantiate.Request{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		h.waitBuild("app-"+strconv.Itoa(i), "started alongside the others", started)
	}
}

// cancel sets status.cancelled as kubectl archway cancel-build does.
func cancel(h *harness, name string) {
	h.t.Helper()
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
	if err := k8s.Status().Patch(h.ctx, b, client.RawPatch(types.MergePatchType, []byte(`{"status":{"cancelled":true}}`))); err != nil {
		h.t.Fatal(err)
	}
}

func bedWait(h *harness, cond func() bool) error {
	return waitPoll(h.ctx, cond)
}
