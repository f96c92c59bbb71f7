package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	buildv1ac "github.com/archway-build/archway/pkg/apis/build/v1/applyconfiguration/build/v1"
)

// ssaPlatforms are twenty distinct platforms, one per concurrent writer.
var ssaPlatforms = []string{
	"linux/amd64", "linux/amd64/v2", "linux/amd64/v3", "linux/amd64/v4", "linux/arm64",
	"linux/arm64/v9", "linux/arm/v7", "linux/arm/v6", "linux/arm/v5", "linux/ppc64le",
	"linux/ppc64le/power9", "linux/ppc64le/power10", "linux/s390x", "linux/riscv64", "linux/386",
	"linux/mips64le", "linux/loong64", "windows/amd64", "windows/arm64", "freebsd/amd64",
}

const (
	ssaRounds        = 5
	controllerRounds = 4 * ssaRounds
	controllerOwner  = "archway-build-controller"
)

func builderOwner(platform string) string {
	return "archway-builder-" + strings.ReplaceAll(platform, "/", "-")
}

// platformEntry is what the builder of platform applies in round r: it moves
// its entry from Pending to Running to Complete and changes every other
// field each round, so a lost write shows as a stale value.
func platformEntry(build, platform string, r int, now metav1.Time) *buildv1ac.BuildStatusPlatformApplyConfiguration {
	parts := strings.Split(platform, "/")
	output := buildv1ac.BuildStatusPlatformOutput().
		WithImageDigest(fmt.Sprintf("sha256:%064x", r*1000+len(platform))).
		WithOS(parts[0]).
		WithArchitecture(parts[1])
	if len(parts) == 3 {
		output.WithVariant(parts[2])
	}
	phase := buildv1.BuildPhaseRunning
	switch r {
	case 0:
		phase = buildv1.BuildPhasePending
	case ssaRounds - 1:
		phase = buildv1.BuildPhaseComplete
	}
	entry := buildv1ac.BuildStatusPlatform().
		WithPlatform(platform).
		WithPhase(phase).
		WithMessage(fmt.Sprintf("%s round %d", platform, r)).
		WithPodName(build + "-" + strings.ReplaceAll(platform, "/", "-") + "-build").
		WithStartTimestamp(now).
		WithOutput(output)
	if phase == buildv1.BuildPhaseComplete {
		entry.WithCompletionTimestamp(now)
	}
	return entry
}

// applyStatus applies obj to the status subresource as field manager owner,
// forcing ownership, and retries what a writer must retry: server timeouts,
// conflicts and throttling. Twenty-one writers of one object make the
// apiserver retry its optimistic writes, and on a loaded machine a request
// can outlive its 34 s server-side limit; an apply is idempotent, so the
// writer sends it again. retries counts the retries.
func applyStatus(ctx context.Context, obj *buildv1ac.BuildApplyConfiguration, owner string, retries *atomic.Int64) error {
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 8, Cap: 5 * time.Second}
	first := true
	return retry.OnError(backoff, isTransient, func() error {
		if !first {
			retries.Add(1)
		}
		first = false
		return b.Client.Status().Apply(ctx, obj, client.FieldOwner(owner), client.ForceOwnership)
	})
}

func isTransient(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsConflict(err) || apierrors.IsTooManyRequests(err)
}

// TestConcurrentPlatformWriters runs twenty builders, each applying its own
// status.platforms entry under its own field manager round after round,
// while a controller-like writer applies the build's phase, reason, message
// and summary. Nothing any of them wrote last may be missing at the end.
func TestConcurrentPlatformWriters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	build := typedBuild(ns, "concurrent")
	build.Spec.Platforms = nil // resolved by the controller: the entries are the list
	g.Expect(b.Client.Create(ctx, build)).To(Succeed())
	now := metav1.NewTime(time.Now().Truncate(time.Second))

	start := make(chan struct{})
	began := time.Now()
	var retries atomic.Int64
	errs := make(chan error, len(ssaPlatforms)+1)
	var wg sync.WaitGroup
	for _, platform := range ssaPlatforms {
		wg.Go(func() {
			<-start
			for r := range ssaRounds {
				obj := buildv1ac.Build(build.Name, ns).
					WithStatus(buildv1ac.BuildStatus().WithPlatforms(platformEntry(build.Name, platform, r, now)))
				if err := applyStatus(ctx, obj, builderOwner(platform), &retries); err != nil {
					errs <- fmt.Errorf("builder %s round %d: %w", platform, r, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		<-start
		for r := range controllerRounds {
			phase := buildv1.BuildPhaseRunning
			if r == 0 {
				phase = buildv1.BuildPhasePending
			}
			obj := buildv1ac.Build(build.Name, ns).WithStatus(buildv1ac.BuildStatus().
				WithPhase(phase).
				WithReason(buildv1.StatusReason(fmt.Sprintf("Round%d", r))).
				WithMessage(fmt.Sprintf("controller round %d", r)).
				WithStartTimestamp(now).
				WithPlatformsSummary(fmt.Sprintf("%d/%d", r, len(ssaPlatforms))))
			if err := applyStatus(ctx, obj, controllerOwner, &retries); err != nil {
				errs <- fmt.Errorf("controller round %d: %w", r, err)
				return
			}
		}
	})
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d applies in %s, %d retried after a transient error",
		len(ssaPlatforms)*ssaRounds+controllerRounds, time.Since(began).Round(time.Millisecond), retries.Load())

	got := &buildv1.Build{}
	g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(build), got)).To(Succeed())

	// The controller's last write.
	last := controllerRounds - 1
	g.Expect(got.Status.Phase).To(Equal(buildv1.BuildPhaseRunning))
	g.Expect(got.Status.Reason).To(Equal(buildv1.StatusReason(fmt.Sprintf("Round%d", last))))
	g.Expect(got.Status.Message).To(Equal(fmt.Sprintf("controller round %d", last)))
	g.Expect(got.Status.PlatformsSummary).To(Equal(fmt.Sprintf("%d/%d", last, len(ssaPlatforms))))

	// Every builder's last write, in full.
	g.Expect(got.Status.Platforms).To(HaveLen(len(ssaPlatforms)))
	byPlatform := map[string]buildv1.BuildStatusPlatform{}
	for _, e := range got.Status.Platforms {
		byPlatform[e.Platform] = e
	}
	for _, platform := range ssaPlatforms {
		want := buildv1.BuildStatusPlatform{}
		wantAC := platformEntry(build.Name, platform, ssaRounds-1, now)
		want.Platform = *wantAC.Platform
		want.Phase = *wantAC.Phase
		want.Message = *wantAC.Message
		want.PodName = *wantAC.PodName
		want.StartTimestamp = wantAC.StartTimestamp
		want.CompletionTimestamp = wantAC.CompletionTimestamp
		want.Output = &buildv1.BuildStatusPlatformOutput{
			ImageDigest:  *wantAC.Output.ImageDigest,
			OS:           *wantAC.Output.OS,
			Architecture: *wantAC.Output.Architecture,
		}
		if wantAC.Output.Variant != nil {
			want.Output.Variant = *wantAC.Output.Variant
		}
		g.Expect(byPlatform).To(HaveKeyWithValue(platform, want), "builder %s", platform)
	}

	// Each writer owns exactly its own part of the status.
	owners := map[string]map[string]any{}
	for _, mf := range got.ManagedFields {
		if mf.Subresource == "status" && mf.Operation == metav1.ManagedFieldsOperationApply {
			var fields map[string]any
			g.Expect(json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields)).To(Succeed())
			owners[mf.Manager] = fields
		}
	}
	g.Expect(owners).To(HaveLen(len(ssaPlatforms) + 1))
	g.Expect(keys(owners[controllerOwner])).To(ConsistOf("f:status"))
	g.Expect(keys(owners[controllerOwner]["f:status"])).To(ConsistOf(
		"f:phase", "f:reason", "f:message", "f:startTimestamp", "f:platformsSummary"))
	for _, platform := range ssaPlatforms {
		fields := owners[builderOwner(platform)]
		g.Expect(keys(fields)).To(ConsistOf("f:status"), "builder %s", platform)
		g.Expect(keys(fields["f:status"])).To(ConsistOf("f:platforms"), "builder %s", platform)
		entries := fields["f:status"].(map[string]any)["f:platforms"]
		g.Expect(keys(entries)).To(ConsistOf(fmt.Sprintf(`k:{"platform":%q}`, platform)), "builder %s", platform)
	}
}

// keys returns the keys of a managed fields map.
func keys(v any) []string {
	m, _ := v.(map[string]any)
	var out []string
	for k := range m {
		if k != "." {
			out = append(out, k)
		}
	}
	return out
}

// TestBuilderRemovesOnlyItsOwnFields: a builder that stops applying a field
// of its entry removes it, and nothing else changes.
func TestBuilderRemovesOnlyItsOwnFields(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	build := typedBuild(ns, "removal")
	g.Expect(b.Client.Create(ctx, build)).To(Succeed())
	now := metav1.NewTime(time.Now().Truncate(time.Second))

	apply := func(platform string, entry *buildv1ac.BuildStatusPlatformApplyConfiguration) {
		obj := buildv1ac.Build(build.Name, ns).WithStatus(buildv1ac.BuildStatus().WithPlatforms(entry))
		g.Expect(b.Client.Status().Apply(ctx, obj, client.FieldOwner(builderOwner(platform)), client.ForceOwnership)).To(Succeed())
	}
	apply("linux/amd64", platformEntry(build.Name, "linux/amd64", 1, now))
	apply("linux/arm64", platformEntry(build.Name, "linux/arm64", 1, now).WithLogSnippet("step 3/5"))
	apply("linux/arm64", platformEntry(build.Name, "linux/arm64", 2, now)) // no log snippet

	got := &buildv1.Build{}
	g.Expect(b.Client.Get(ctx, client.ObjectKeyFromObject(build), got)).To(Succeed())
	g.Expect(got.Status.Platforms).To(HaveLen(2))
	for _, e := range got.Status.Platforms {
		g.Expect(e.LogSnippet).To(BeEmpty())
		switch e.Platform {
		case "linux/amd64":
			g.Expect(e.Message).To(Equal("linux/amd64 round 1"))
		case "linux/arm64":
			g.Expect(e.Message).To(Equal("linux/arm64 round 2"))
		}
	}
	g.Expect(got.Status.Phase).To(Equal(buildv1.BuildPhaseNew))
}
