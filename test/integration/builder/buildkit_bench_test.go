package builder_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/archway-build/archway/test/bed"
)

// The builder benchmark against BuildKit runs every case of
// testdata/bench through `builder build` and through BuildKit (buildkitd
// with its runc worker, buildctl with the Dockerfile frontend), both pushing
// a manifest list to the bed's registry, first cold (an empty store, a new
// daemon state) and then warm (the same builds again with the same store or
// daemon, from fresh copies of the contexts, to new tags). It prints each
// case's wall times and CPU times and their ratios; it asserts nothing
// about time. The CPU times are those of everything each tool ran for the
// build (archway: the builder and the processes it waited for; BuildKit:
// buildctl and what buildkitd spent, with its runc children, during the
// build), so they compare the work done even when other work shares the
// machine, which the wall times do not.
//
//	go test -tags "$BUILD_TAGS" -run '^$' -bench BuilderVsBuildKit -benchtime 1x ./test/integration/builder/
//
// ARCHWAY_BENCH_CASES (comma-separated case names or name prefixes) picks
// cases; the default is all of them. ARCHWAY_BENCH_BUILDER_FLAGS adds flags
// to every `builder build` (space-separated, e.g. "--isolation chroot"), to
// compare the builder's ways.

// benchCase is one directory of testdata/bench: a Dockerfile whose first
// line is `ARG BASE` (the bed's base image is passed as that build arg), a
// platforms file (comma-separated), the files the Dockerfile copies, and
// optionally a generate file that asks for more files to be written into
// each copy of the context (see generateFiles).
type benchCase struct {
	name      string
	dir       string
	platforms []string
}

// benchCases reads testdata/bench, keeping the cases filter selects
// (comma-separated names or prefixes; empty for all).
func benchCases(tb testing.TB, filter string) []benchCase {
	tb.Helper()
	root := filepath.Join("testdata", "bench")
	entries, err := os.ReadDir(root)
	if err != nil {
		tb.Fatal(err)
	}
	var wanted []string
	for w := range strings.SplitSeq(filter, ",") {
		if w = strings.TrimSpace(w); w != "" {
			wanted = append(wanted, w)
		}
	}
	var cases []benchCase
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if len(wanted) > 0 && !slices.ContainsFunc(wanted, func(w string) bool { return strings.HasPrefix(e.Name(), w) }) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		raw, err := os.ReadFile(filepath.Join(dir, "platforms"))
		if err != nil {
			tb.Fatal(err)
		}
		cases = append(cases, benchCase{name: e.Name(), dir: dir, platforms: strings.Split(strings.TrimSpace(string(raw)), ",")})
	}
	if len(cases) == 0 {
		tb.Fatalf("no benchmark case in %s matches %q", root, filter)
	}
	return cases
}

// freshContext copies c's directory into a new temporary directory and
// writes the files its generate file asks for.
func freshContext(tb testing.TB, c benchCase) string {
	tb.Helper()
	dst := tb.TempDir()
	if err := os.CopyFS(dst, os.DirFS(c.dir)); err != nil {
		tb.Fatal(err)
	}
	if err := generateFiles(dst); err != nil {
		tb.Fatalf("case %s: %v", c.name, err)
	}
	return dst
}

// generateFiles reads dir/generate, lines of `dir NAME COUNT SIZE` (a
// directory of COUNT files of SIZE bytes) or `file NAME SIZE`, and writes
// those files with pseudo-random content that is the same every time (so
// that it does not compress away and a warm build sees the same bytes).
func generateFiles(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "generate"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(17, 42))
	write := func(path string, size int) error {
		buf := make([]byte, size)
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
		return os.WriteFile(path, buf, 0o644)
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0:
		case f[0] == "dir" && len(f) == 4:
			count, err1 := strconv.Atoi(f[2])
			size, err2 := strconv.Atoi(f[3])
			if err := errors.Join(err1, err2); err != nil {
				return fmt.Errorf("generate %q: %w", sc.Text(), err)
			}
			sub := filepath.Join(dir, f[1])
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return err
			}
			for i := range count {
				if err := write(filepath.Join(sub, fmt.Sprintf("f%04d", i)), size); err != nil {
					return err
				}
			}
		case f[0] == "file" && len(f) == 3:
			size, err := strconv.Atoi(f[2])
			if err != nil {
				return fmt.Errorf("generate %q: %w", sc.Text(), err)
			}
			if err := write(filepath.Join(dir, f[1]), size); err != nil {
				return err
			}
		default:
			return fmt.Errorf("generate: cannot read %q: want `dir NAME COUNT SIZE` or `file NAME SIZE`", sc.Text())
		}
	}
	return sc.Err()
}

// caseTimes are one case's wall times, and CPU times (…CPU).
type caseTimes struct {
	archwayCold, buildkitCold, archwayWarm, buildkitWarm             time.Duration
	archwayColdCPU, buildkitColdCPU, archwayWarmCPU, buildkitWarmCPU time.Duration
}

// checkBenchTools fails tb unless the builder builds and BuildKit's
// programs are installed.
func checkBenchTools(tb testing.TB) {
	tb.Helper()
	var errs []error
	for _, name := range []string{"buildkitd", "buildctl"} {
		_, err := bed.Tool(name)
		errs = append(errs, err)
	}
	if _, err := exec.LookPath("runc"); err != nil {
		errs = append(errs, fmt.Errorf("BuildKit's worker needs runc, which is not installed: run `make tools` (or `hack/tools.sh apt`): %w", err))
	}
	if _, err := builderBinary(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
}

// runCase builds c cold and then warm with both tools and returns the
// times. archwayFirst says which tool goes first (alternated over cases).
func runCase(tb testing.TB, c benchCase, archwayFirst bool) caseTimes {
	tb.Helper()
	reg := theBed.Registry.Host
	platforms := strings.Join(c.platforms, ",")
	workDir := tb.TempDir()
	daemon, err := bed.StartBuildKit(context.Background(), reg)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() {
		if err := daemon.Stop(); err != nil {
			tb.Logf("stopping buildkitd: %v", err)
		}
	}()

	var times caseTimes
	archway := func(round string) (time.Duration, time.Duration) {
		ref := fmt.Sprintf("%s/bench/archway-%s:%s", reg, c.name, round)
		ctxDir := freshContext(tb, c)
		start := time.Now()
		args := append([]string{"build", "--platform", platforms, "--build-arg", "BASE=" + theBed.BaseImage,
			"--work-dir", workDir, "-t", ref}, strings.Fields(os.Getenv("ARCHWAY_BENCH_BUILDER_FLAGS"))...)
		log, code, cpu := runBuilderMeasured(tb, 10*time.Minute, nil, append(args, ctxDir)...)
		took := time.Since(start)
		if code != 0 {
			tb.Fatalf("case %s (%s): builder build failed:\n%s", c.name, round, log)
		}
		checkBenchIndex(tb, ref, len(c.platforms))
		return took, cpu
	}
	buildkit := func(round string) (time.Duration, time.Duration) {
		ref := fmt.Sprintf("%s/bench/buildkit-%s:%s", reg, c.name, round)
		ctxDir := freshContext(tb, c)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		res, err := daemon.Build(ctx, bed.BuildKitBuild{Context: ctxDir, Platforms: c.platforms,
			BuildArgs: map[string]string{"BASE": theBed.BaseImage}, Output: ref})
		if err != nil {
			tb.Fatalf("case %s (%s): %v", c.name, round, err)
		}
		checkBenchIndex(tb, ref, len(c.platforms))
		return res.Wall, res.CPU
	}
	for _, round := range []string{"cold", "warm"} {
		var a, k, aCPU, kCPU time.Duration
		if archwayFirst {
			a, aCPU = archway(round)
			k, kCPU = buildkit(round)
		} else {
			k, kCPU = buildkit(round)
			a, aCPU = archway(round)
		}
		if round == "cold" {
			times.archwayCold, times.buildkitCold = a, k
			times.archwayColdCPU, times.buildkitColdCPU = aCPU, kCPU
		} else {
			times.archwayWarm, times.buildkitWarm = a, k
			times.archwayWarmCPU, times.buildkitWarmCPU = aCPU, kCPU
		}
	}
	return times
}

// checkBenchIndex checks that ref is an index of n images, so that both
// tools are seen to do the same work.
func checkBenchIndex(tb testing.TB, ref string, n int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	img, err := theBed.Registry.OpenImage(ctx, ref)
	if err != nil {
		tb.Fatalf("%s: %v", ref, err)
	}
	defer img.Close()
	index, _, err := img.Index(ctx)
	if err != nil {
		tb.Fatalf("%s: %v", ref, err)
	}
	var images int
	for _, m := range index.Manifests {
		// BuildKit may add attestation manifests, which name no platform
		// of their own ("unknown/unknown").
		if m.Platform != nil && m.Platform.OS != "unknown" {
			images++
		}
	}
	if images != n {
		tb.Fatalf("%s is an index of %d images, want %d: %+v", ref, images, n, index.Manifests)
	}
}

// BenchmarkBuilderVsBuildKit runs the corpus of testdata/bench through
// `builder build` and BuildKit, cold and warm, and prints the times.
func BenchmarkBuilderVsBuildKit(b *testing.B) {
	checkBenchTools(b)
	cases := benchCases(b, os.Getenv("ARCHWAY_BENCH_CASES"))
	b.ResetTimer()
	var all []caseTimes
	for range b.N {
		all = all[:0]
		for i, c := range cases {
			all = append(all, runCase(b, c, i%2 == 0))
		}
	}
	b.StopTimer()
	total := printBenchTable(os.Stdout, cases, all)
	b.ReportMetric(total.archwayCold.Seconds(), "archway-cold-s")
	b.ReportMetric(total.buildkitCold.Seconds(), "buildkit-cold-s")
	b.ReportMetric(total.archwayWarm.Seconds(), "archway-warm-s")
	b.ReportMetric(total.buildkitWarm.Seconds(), "buildkit-warm-s")
	b.ReportMetric(total.archwayColdCPU.Seconds(), "archway-cold-cpu-s")
	b.ReportMetric(total.buildkitColdCPU.Seconds(), "buildkit-cold-cpu-s")
	b.ReportMetric(total.archwayWarmCPU.Seconds(), "archway-warm-cpu-s")
	b.ReportMetric(total.buildkitWarmCPU.Seconds(), "buildkit-warm-cpu-s")
}

// TestBuilderVsBuildKitSmoke runs the benchmark's path on one case (or
// those of ARCHWAY_BENCH_CASES) so that it keeps working: both tools must
// build and push every platform, cold and warm. The times are printed.
func TestBuilderVsBuildKitSmoke(t *testing.T) {
	checkBenchTools(t)
	filter := os.Getenv("ARCHWAY_BENCH_CASES")
	if filter == "" {
		filter = "02-uname"
	}
	cases := benchCases(t, filter)
	var all []caseTimes
	for i, c := range cases {
		all = append(all, runCase(t, c, i%2 == 0))
	}
	var out bytes.Buffer
	printBenchTable(&out, cases, all)
	t.Log(out.String())
}

// printBenchTable prints the wall and CPU times of every case and their
// totals, and returns the totals.
func printBenchTable(w io.Writer, cases []benchCase, all []caseTimes) caseTimes {
	var total caseTimes
	ratio := func(a, k time.Duration) string {
		if k == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a.Seconds()/k.Seconds())
	}
	s := func(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
	row := func(name, pl string, t caseTimes) string {
		return fmt.Sprintf("%-20s %-3s  %8s %8s %5s  %8s %8s %5s   %8s %8s %5s  %8s %8s %5s\n", name, pl,
			s(t.archwayCold), s(t.buildkitCold), ratio(t.archwayCold, t.buildkitCold),
			s(t.archwayColdCPU), s(t.buildkitColdCPU), ratio(t.archwayColdCPU, t.buildkitColdCPU),
			s(t.archwayWarm), s(t.buildkitWarm), ratio(t.archwayWarm, t.buildkitWarm),
			s(t.archwayWarmCPU), s(t.buildkitWarmCPU), ratio(t.archwayWarmCPU, t.buildkitWarmCPU))
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n%-20s %-3s  %-48s   %-48s\n", "", "", "------------------- cold -------------------", "------------------- warm -------------------")
	fmt.Fprintf(&sb, "%-20s %-3s  %-23s  %-23s   %-23s  %-23s\n", "", "", "wall", "CPU", "wall", "CPU")
	fmt.Fprintf(&sb, "%-20s %-3s  %8s %8s %5s  %8s %8s %5s   %8s %8s %5s  %8s %8s %5s\n", "case", "pl",
		"archway", "buildkit", "ratio", "archway", "buildkit", "ratio", "archway", "buildkit", "ratio", "archway", "buildkit", "ratio")
	for i, c := range cases {
		t := all[i]
		sb.WriteString(row(c.name, strconv.Itoa(len(c.platforms)), t))
		total.archwayCold += t.archwayCold
		total.buildkitCold += t.buildkitCold
		total.archwayWarm += t.archwayWarm
		total.buildkitWarm += t.buildkitWarm
		total.archwayColdCPU += t.archwayColdCPU
		total.buildkitColdCPU += t.buildkitColdCPU
		total.archwayWarmCPU += t.archwayWarmCPU
		total.buildkitWarmCPU += t.buildkitWarmCPU
	}
	sb.WriteString(row("total", "", total))
	_, _ = io.WriteString(w, sb.String())
	return total
}
