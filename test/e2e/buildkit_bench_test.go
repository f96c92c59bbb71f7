package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

// The comparison of a four-platform Build on the bed with BuildKit builds
// one Dockerfile (a base, a COPY of a file of the source, a RUN) for the
// bed's four platforms both ways, cold and then warm:
//
//   - archway: a BuildConfig with a registry layer cache
//     (dockerStrategy.layerCache Registry), started twice through
//     build-controller, each platform's build pod starting with an empty
//     store; the first Build finds an empty cache, the second reuses each
//     platform's whole result from the cache repositories the first pushed
//     (no buildah step runs; the Build's labels are added to the config).
//   - BuildKit: buildkitd (runc worker) and buildctl with the Dockerfile
//     frontend, pushing the index to the same registry. Cold: a new daemon
//     (empty state), exporting its cache to the registry (mode=max, as
//     archway pushes every step). Warm from the registry: another new
//     daemon importing that cache, as archway's pods start empty. Warm
//     local: the cold daemon again, its own state kept (what a long-lived
//     buildkitd has, and a build pod does not).
//
// Per platform, archway's figure is the platform's build pod from Running
// to its end (clone, pull, steps, commit, push, report); BuildKit's is the
// span of the platform's own Dockerfile steps (pull included; the shared
// export and push are not per platform). The totals are wall times: the
// Build from its creation to Complete (pods, manifest-list pod and all),
// and buildctl from start to exit. Load (1-minute average) is printed, as
// the machine is shared.

// benchDockerfile is the Dockerfile both build.
func benchDockerfile(base string) string {
	return "FROM " + base + "\nCOPY app.txt /app/app.txt\nRUN echo \"ran on $(uname -m)\" && uname -m > /machine\n"
}

// benchApp is the file the Dockerfile copies.
const benchApp = "hello from the benchmark\n"

// archwayRun is one Build's figures.
type archwayRun struct {
	build    *buildv1.Build
	wall     time.Duration
	overhead framework.Overhead
	// pods are the platform pods' runs (Running to end), logs their
	// logs with the runner's timestamps, phases where each one's time went.
	pods   map[string]time.Duration
	logs   map[string]string
	phases map[string][]phase
	// manifestListLog is the manifest-list pod's log, and pushTook what it
	// says the push took from the end of its wait for the platforms (what
	// was left to read, the index push).
	manifestListLog string
	pushTook        time.Duration
	// busyCPU is the CPU time the whole machine spent from the Build's
	// creation to Complete (every process, the bed's included): when it
	// is near twice the wall time, both cores were busy and any work left
	// out shortens the build. requests are the apiserver's requests and
	// registryRequests the registry's over the same stretch.
	busyCPU          time.Duration
	requests         bed.Counts
	registryRequests int
}

// buildVsBuildKit are the figures of one comparison.
type buildVsBuildKit struct {
	archwayCold, archwayWarm                      archwayRun
	buildkitCold, buildkitWarm, buildkitWarmLocal bed.BuildKitResult
	loadBefore, loadAfter                         string
}

// compareWithBuildKit runs the comparison once: archway's Builds in a new
// namespace, then BuildKit's builds (or the other way round when
// buildkitFirst), and returns the figures. It fails tb when either does
// not produce a four-platform index.
func compareWithBuildKit(tb testing.TB, buildkitFirst bool) buildVsBuildKit {
	tb.Helper()
	var r buildVsBuildKit
	r.loadBefore = loadAverage()
	h := newHarness(tb, "vsbk")
	files := map[string]string{"Dockerfile": benchDockerfile(env.Bed.BaseImage), "app.txt": benchApp}
	archway := func() {
		bc := h.buildConfigSpecFiles(files, framework.Platforms, nil)
		bc.Spec.Strategy.DockerStrategy.LayerCache = &buildv1.LayerCache{Mode: buildv1.LayerCacheRegistry}
		h.create(bc)
		r.archwayCold = h.timedBuild(1)
		r.archwayWarm = h.timedBuild(2)
	}
	buildkit := func() {
		ctxDir := filepath.Join(tb.TempDir(), "context")
		if err := os.MkdirAll(ctxDir, 0o755); err != nil {
			tb.Fatal(err)
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(ctxDir, name), []byte(content), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
		repo := env.Bed.Registry.Host + "/" + h.repo + "-buildkit"
		cache := repo + "-cache:cache"
		build := func(k *bed.BuildKit, b bed.BuildKitBuild) bed.BuildKitResult {
			tb.Helper()
			b.Context, b.Platforms = ctxDir, framework.Platforms
			res, err := k.Build(h.ctx, b)
			if err != nil {
				tb.Fatal(err)
			}
			machines, err := indexChildren(h.ctx, b.Output, "/machine")
			if err != nil {
				tb.Fatalf("BuildKit's image %s: %v", b.Output, err)
			}
			if len(machines) != len(framework.Platforms) {
				tb.Fatalf("BuildKit's image %s has %v, want the four platforms", b.Output, machines)
			}
			return res
		}
		cold := startBuildKit(tb)
		r.buildkitCold = build(cold, bed.BuildKitBuild{Output: repo + ":cold", CacheTo: cache})
		fresh := startBuildKit(tb)
		r.buildkitWarm = build(fresh, bed.BuildKitBuild{Output: repo + ":warm", CacheFrom: cache})
		stopBuildKit(tb, fresh)
		r.buildkitWarmLocal = build(cold, bed.BuildKitBuild{Output: repo + ":warm-local"})
		stopBuildKit(tb, cold)
	}
	if buildkitFirst {
		buildkit()
		archway()
	} else {
		archway()
		buildkit()
	}
	r.loadAfter = loadAverage()
	return r
}

func startBuildKit(tb testing.TB) *bed.BuildKit {
	tb.Helper()
	k, err := bed.StartBuildKit(context.Background(), env.Bed.Registry.Host)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stopBuildKit(tb, k) })
	return k
}

func stopBuildKit(tb testing.TB, k *bed.BuildKit) {
	if err := k.Stop(); err != nil {
		tb.Logf("stopping buildkitd: %v", err)
	}
}

// timedBuild starts build n of the case's BuildConfig, waits for it to
// complete and returns its figures.
func (h *harness) timedBuild(n int64) archwayRun {
	h.t.Helper()
	h.watchBuild(instantiate.Name(h.bc.Name, n))
	requestsBefore, err := env.Bed.APIRequests(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	registryBefore, err := env.Bed.Registry.Requests()
	if err != nil {
		h.t.Fatal(err)
	}
	busyBefore, err := machineBusy()
	if err != nil {
		h.t.Fatal(err)
	}
	start := time.Now()
	h.tl.Created = start
	b, err := framework.StartBuild(h.ctx, env.Bed.Client, h.bc)
	if err != nil {
		h.t.Fatalf("starting build %d: %v", n, err)
	}
	if b.Name != h.b.Name {
		h.t.Fatalf("started %s, want %s", b.Name, h.b.Name)
	}
	b = h.waitTerminal()
	r := archwayRun{build: b, pods: map[string]time.Duration{}, logs: map[string]string{}, phases: map[string][]phase{}}
	if b.Status.Phase != buildv1.BuildPhaseComplete {
		h.t.Fatalf("build %s ended %s: %s (platforms %+v)", b.Name, b.Status.Phase, b.Status.Message, b.Status.Platforms)
	}
	_, terminal := h.tl.Build()
	r.wall = terminal.Sub(start)
	busyAfter, err := machineBusy()
	if err != nil {
		h.t.Fatal(err)
	}
	r.busyCPU = busyAfter - busyBefore
	requestsAfter, err := env.Bed.APIRequests(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	r.requests = requestsAfter.Sub(requestsBefore)
	registryAfter, err := env.Bed.Registry.Requests()
	if err != nil {
		h.t.Fatal(err)
	}
	r.registryRequests = len(registryAfter) - len(registryBefore)
	if r.overhead, err = h.tl.Overhead(b.Name, framework.Platforms); err != nil {
		h.t.Fatal(err)
	}
	for _, p := range framework.Platforms {
		pod := buildv1.PlatformPodName(b.Name, p)
		times, _ := h.tl.Pod(pod)
		r.pods[p] = times.Finished.Sub(times.Running)
		logs, err := env.Kubectl(h.ctx, "logs", "--timestamps", "-n", h.ns, pod)
		if err != nil {
			h.t.Fatalf("logs of %s: %v\n%s", pod, err, logs)
		}
		r.logs[p] = logs
		r.phases[p] = phases(logs, times.Running, times.Finished)
	}
	mlPod := buildv1.ManifestListPodName(b.Name)
	if r.manifestListLog, err = env.Kubectl(h.ctx, "logs", "--timestamps", "-n", h.ns, mlPod); err != nil {
		h.t.Fatalf("logs of %s: %v\n%s", mlPod, err, r.manifestListLog)
	}
	r.pushTook = pushTook(r.manifestListLog)
	return r
}

// pushTook is what the manifest-list pod's log says its push took
// ("Pushed <ref> (<media type>) in 18ms"), 0 when it does not say.
func pushTook(log string) time.Duration {
	for line := range strings.Lines(log) {
		if !strings.Contains(line, " Pushed ") {
			continue
		}
		i := strings.LastIndex(line, " in ")
		if i < 0 {
			continue
		}
		if d, err := time.ParseDuration(strings.TrimSpace(line[i+len(" in "):])); err == nil {
			return d
		}
	}
	return 0
}

// phase is a stretch of a build pod's run, named by the log line that
// starts it.
type phase struct {
	name string
	took time.Duration
}

// phases splits a pod's run, from running to finished, at lines of the
// builder's log (lines "<RFC3339 time> <text>", as `kubectl logs
// --timestamps` prints them): "start" is running to the first line
// (process start, the Running report, the store), "clone" the source,
// "open+key" the wait for the store, the base images' digests and the
// result key's lookup, then each Dockerfile step by its number and
// instruction ("STEP 2/4: COPY ..." starts "2/4 COPY"), "commit" the image
// and its push, or "push" a cached result's, "report" the read-back, the
// Complete report and the exit.
func phases(logs string, running, finished time.Time) []phase {
	type mark struct {
		name string
		at   time.Time
	}
	marks := []mark{{"start", running}}
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		stamp, text, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			continue
		}
		name := ""
		switch {
		case len(marks) == 1:
			name = "clone"
		case strings.HasPrefix(text, "STEP "):
			if n, step, ok := strings.Cut(strings.TrimPrefix(text, "STEP "), ": "); ok {
				instruction, _, _ := strings.Cut(step, " ")
				name = n + " " + instruction
			}
		case text == "COMMIT" || strings.HasPrefix(text, "COMMIT "):
			name = "commit"
		case strings.HasPrefix(text, "Checked out "):
			name = "open+key"
		case strings.HasPrefix(text, "Reusing ") && strings.Contains(text, "from the layer cache"):
			name = "push"
		case strings.HasPrefix(text, "Pushed "):
			name = "report"
		}
		if name != "" && !seen[name] {
			seen[name] = true
			marks = append(marks, mark{name, at})
		}
	}
	marks = append(marks, mark{"end", finished})
	out := make([]phase, 0, len(marks)-1)
	for i := 0; i+1 < len(marks); i++ {
		out = append(out, phase{marks[i].name, marks[i+1].at.Sub(marks[i].at)})
	}
	return out
}

// machineBusy is the CPU time all of the machine's cores have spent busy
// since boot: user, nice, system, irq and softirq of /proc/stat's first
// line (guest time is already in user and nice; steal is another
// machine's).
func machineBusy() (time.Duration, error) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line)
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		n, err := strconv.ParseInt(fields[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		ticks += n
	}
	// USER_HZ is 100 on every Linux this runs on.
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// loadAverage is the machine's 1-, 5- and 15-minute load averages.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// print writes the comparison's table: per platform and in total, cold and
// warm, with the ratio archway / BuildKit, and where each archway Build's
// time went.
func (r buildVsBuildKit) print(w io.Writer) {
	s := func(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
	ratio := func(a, k time.Duration) string {
		if k <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a.Seconds()/k.Seconds())
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nfour-platform build on the bed vs BuildKit (load %s -> %s)\n", r.loadBefore, r.loadAfter)
	fmt.Fprintf(&sb, "%-15s %8s %8s %6s   %8s %8s %6s   %8s %6s\n", "", "archway", "BuildKit", "ratio", "archway", "BuildKit", "ratio", "BuildKit", "ratio")
	fmt.Fprintf(&sb, "%-15s %24s   %24s   %15s\n", "", "--------- cold ---------", "--- warm from registry --", "-- warm local -")
	row := func(name string, ac, kc, aw, kw, kl time.Duration) {
		fmt.Fprintf(&sb, "%-15s %8s %8s %6s   %8s %8s %6s   %8s %6s\n", name, s(ac), s(kc), ratio(ac, kc), s(aw), s(kw), ratio(aw, kw), s(kl), ratio(aw, kl))
	}
	for _, p := range framework.Platforms {
		row(p, r.archwayCold.pods[p], r.buildkitCold.Platforms[p], r.archwayWarm.pods[p], r.buildkitWarm.Platforms[p], r.buildkitWarmLocal.Platforms[p])
	}
	row("total (wall)", r.archwayCold.wall, r.buildkitCold.Wall, r.archwayWarm.wall, r.buildkitWarm.Wall, r.buildkitWarmLocal.Wall)
	fmt.Fprintf(&sb, "BuildKit steps cached: cold %d/%d, warm from registry %d/%d, warm local %d/%d; export and push %s, %s, %s\n",
		r.buildkitCold.CachedSteps, r.buildkitCold.Steps, r.buildkitWarm.CachedSteps, r.buildkitWarm.Steps,
		r.buildkitWarmLocal.CachedSteps, r.buildkitWarmLocal.Steps, s(r.buildkitCold.Export), s(r.buildkitWarm.Export), s(r.buildkitWarmLocal.Export))
	for _, run := range []struct {
		name string
		r    archwayRun
	}{{"cold", r.archwayCold}, {"warm", r.archwayWarm}} {
		o := run.r.overhead
		fmt.Fprintf(&sb, "archway %s: fan-out %s (Build created and seen %s), scheduling %s, pod start %s, longest platform pod %s, last platform noticed %s, manifest-list pod %s (its push after its wait %s)\n",
			run.name, s(o.FanOut), s(o.Created), s(o.Scheduling), s(o.PodStart), s(o.LongestRun), s(o.Noticed), s(o.ManifestList),
			run.r.pushTook.Round(time.Millisecond))
		for _, p := range framework.Platforms {
			fmt.Fprintf(&sb, "  %-14s", p)
			for _, ph := range run.r.phases[p] {
				fmt.Fprintf(&sb, " %s %s", ph.name, s(ph.took))
			}
			sb.WriteString("\n")
		}
		var requests []string
		for line := range strings.Lines(run.r.requests.String()) {
			requests = append(requests, strings.Join(strings.Fields(line), " "))
		}
		fmt.Fprintf(&sb, "  machine busy %s of CPU over %s; registry requests %d; apiserver requests: %s\n",
			s(run.r.busyCPU), s(run.r.wall), run.r.registryRequests, strings.Join(requests, ", "))
		if os.Getenv("ARCHWAY_BENCH_LOGS") != "" {
			for _, p := range framework.Platforms {
				fmt.Fprintf(&sb, "--- %s build pod of the %s build:\n%s", p, run.name, run.r.logs[p])
			}
			fmt.Fprintf(&sb, "--- manifest-list pod of the %s build:\n%s", run.name, run.r.manifestListLog)
		}
	}
	_, _ = io.WriteString(w, sb.String())
}

// BenchmarkBuildVsBuildKit compares a four-platform Build on the bed,
// cold and then warm from its registry layer cache, with BuildKit building
// the same Dockerfile for the same platforms (see compareWithBuildKit),
// and prints the figures; it asserts nothing about time. Run it with
//
//	go test -tags "..." -run '^$' -bench BuildVsBuildKit -benchtime 3x ./test/e2e/
//
// The two alternate which goes first from one iteration to the next.
// ARCHWAY_BENCH_LOGS=1 prints each build pod's log with its timestamps.
func BenchmarkBuildVsBuildKit(b *testing.B) {
	var sum buildVsBuildKit
	n := 0
	for b.Loop() {
		r := compareWithBuildKit(b, n%2 == 1)
		r.print(os.Stdout)
		n++
		sum.archwayCold.wall += r.archwayCold.wall
		sum.archwayWarm.wall += r.archwayWarm.wall
		sum.buildkitCold.Wall += r.buildkitCold.Wall
		sum.buildkitWarm.Wall += r.buildkitWarm.Wall
		sum.buildkitWarmLocal.Wall += r.buildkitWarmLocal.Wall
	}
	mean := func(d time.Duration) float64 { return d.Seconds() / float64(n) }
	b.ReportMetric(mean(sum.archwayCold.wall), "archway-cold-s")
	b.ReportMetric(mean(sum.buildkitCold.Wall), "buildkit-cold-s")
	b.ReportMetric(mean(sum.archwayWarm.wall), "archway-warm-s")
	b.ReportMetric(mean(sum.buildkitWarm.Wall), "buildkit-warm-registry-s")
	b.ReportMetric(mean(sum.buildkitWarmLocal.Wall), "buildkit-warm-local-s")
}

// TestBuildVsBuildKitSmoke runs the comparison once so that it keeps
// working, and checks that both warm builds are what they claim: archway's
// second Build runs the RUN step on no platform (its logs say the whole
// result came from the cache repository) and BuildKit's warm builds take every step of every
// platform from the imported cache or its own state. It prints the
// figures.
func TestBuildVsBuildKitSmoke(t *testing.T) {
	r := compareWithBuildKit(t, false)
	for _, p := range framework.Platforms {
		if !strings.Contains(r.archwayCold.logs[p], "ran on "+framework.UnameOf[p]) {
			t.Errorf("archway's cold build did not run the RUN step on %s:\n%s", p, r.archwayCold.logs[p])
		}
		if strings.Contains(r.archwayWarm.logs[p], "ran on "+framework.UnameOf[p]) ||
			!strings.Contains(r.archwayWarm.logs[p], "from the layer cache: an earlier build had the same inputs") {
			t.Errorf("archway's warm build on %s did not reuse its result from the registry cache:\n%s", p, r.archwayWarm.logs[p])
		}
	}
	for name, res := range map[string]bed.BuildKitResult{"cold": r.buildkitCold, "warm from registry": r.buildkitWarm, "warm local": r.buildkitWarmLocal} {
		if len(res.Platforms) != len(framework.Platforms) {
			t.Errorf("BuildKit %s: steps of %d platforms seen, want %d: %v", name, len(res.Platforms), len(framework.Platforms), res.Platforms)
		}
	}
	if r.buildkitCold.CachedSteps == r.buildkitCold.Steps {
		t.Errorf("BuildKit's cold build took all its %d steps from a cache", r.buildkitCold.Steps)
	}
	for name, res := range map[string]bed.BuildKitResult{"warm from registry": r.buildkitWarm, "warm local": r.buildkitWarmLocal} {
		if res.Steps == 0 || res.CachedSteps != res.Steps {
			t.Errorf("BuildKit %s took %d of %d steps from its cache, want all (FROM aside)", name, res.CachedSteps, res.Steps)
		}
	}
	var out strings.Builder
	r.print(&out)
	t.Log(out.String())
	t.Logf("archway's arm64 pod, cold:\n%s\nwarm:\n%s", r.archwayCold.logs["linux/arm64"], r.archwayWarm.logs["linux/arm64"])
}

// TestPhases checks how a build pod's timestamped log is split.
func TestPhases(t *testing.T) {
	at := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, "2026-01-01T00:00:"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	logs := `2026-01-01T00:00:01Z Cloning "x" at main
2026-01-01T00:00:02Z Checked out abc
2026-01-01T00:00:03Z STEP 1/3: FROM base
2026-01-01T00:00:04Z STEP 2/3: RUN echo hi
not a timestamped line
2026-01-01T00:00:06Z STEP 3/3: RUN echo again
2026-01-01T00:00:07Z COMMIT
2026-01-01T00:00:09Z Pushed reg/repo@sha256:x (linux/amd64)
`
	got := phases(logs, at("00.5"), at("10"))
	want := []phase{{"start", 500 * time.Millisecond}, {"clone", time.Second}, {"open+key", time.Second}, {"1/3 FROM", time.Second}, {"2/3 RUN", 2 * time.Second},
		{"3/3 RUN", time.Second}, {"commit", 2 * time.Second}, {"report", time.Second}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("phases = %v, want %v", got, want)
	}
}

// TestPushTook checks how the manifest-list pod's push time is read from
// its timestamped log.
func TestPushTook(t *testing.T) {
	log := "2026-11-25T02:30:00.1Z Waiting for linux/s390x (Running)\n" +
		"2026-11-25T02:30:00.2Z Pushing the manifest list of 4 platforms to 127.0.0.1:5000/a/b:v1\n" +
		"2026-11-25T02:30:00.3Z Pushed 127.0.0.1:5000/a/b@sha256:00 (application/vnd.oci.image.index.v1+json) in 18ms\n" +
		"2026-11-25T02:30:00.4Z Removed the per-platform tags 127.0.0.1:5000/a/b:v1-linux-amd64 in 6ms\n"
	if got := pushTook(log); got != 18*time.Millisecond {
		t.Errorf("pushTook = %s, want 18ms", got)
	}
	if got := pushTook("2026-11-25T02:30:00.1Z No manifest list pushed: PlatformBuildFailed: ...\n"); got != 0 {
		t.Errorf("pushTook without a push = %s, want 0", got)
	}
}
