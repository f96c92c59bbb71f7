package builder_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkBuildVsBuildahCLI builds the same four-platform context and
// pushes it as a manifest list to the same registry with `builder build`
// and with the buildah CLI (Debian's, `buildah build --platform ...
// --manifest` then `buildah manifest push --all`), each from a cold
// container store, alternating which goes first, and prints the wall time
// of each round, the medians and their ratio. Run it with
//
//	go test -tags "$BUILD_TAGS" -run '^$' -bench BuildVsBuildahCLI -benchtime 1x ./test/integration/builder/
//
// Each iteration runs ARCHWAY_BENCH_ROUNDS rounds (default 3) of every
// tool: the machines are shared, and medians over alternating rounds are
// what can be compared.
// The buildah CLI runs its default way (--jobs 1: one platform at a time)
// and with --jobs 4, as `builder build` builds four platforms at once.
func BenchmarkBuildVsBuildahCLI(b *testing.B) {
	buildah, err := exec.LookPath("buildah")
	if err != nil {
		b.Skip("the buildah CLI is not installed (hack/tools.sh apt installs it)")
	}
	ctxDir := writeContext(b, archDockerfile())
	platforms := strings.Join(fourPlatforms, ",")
	reg := theBed.Registry.Host
	if _, err := builderBinary(); err != nil {
		b.Fatal(err)
	}

	tools := []struct {
		name string
		run  func(b *testing.B, round int) time.Duration
	}{
		{"builder build", func(b *testing.B, round int) time.Duration {
			start := time.Now()
			log, code := runBuilder(b, nil, "build", "--platform", platforms, "-t", fmt.Sprintf("%s/bench/archway:r%d", reg, round), ctxDir)
			took := time.Since(start)
			if code != 0 {
				b.Fatalf("builder build failed:\n%s", log)
			}
			return took
		}},
		{"buildah CLI", func(b *testing.B, round int) time.Duration {
			return runBuildahCLI(b, buildah, ctxDir, platforms, fmt.Sprintf("%s/bench/buildah:r%d", reg, round), 1)
		}},
		{"buildah CLI --jobs 4", func(b *testing.B, round int) time.Duration {
			return runBuildahCLI(b, buildah, ctxDir, platforms, fmt.Sprintf("%s/bench/buildah-jobs:r%d", reg, round), 4)
		}},
	}
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("ARCHWAY_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	times := make([][]time.Duration, len(tools))
	b.ResetTimer()
	for round := range b.N * rounds {
		for k := range tools {
			i := (k + round) % len(tools) // a different tool goes first each round
			times[i] = append(times[i], tools[i].run(b, round))
		}
	}
	b.StopTimer()

	var out bytes.Buffer
	fmt.Fprintf(&out, "\nFour platforms (%s), cold stores, pushed as a manifest list to %s; %d rounds:\n", platforms, reg, b.N*rounds)
	medians := make([]time.Duration, len(tools))
	for i, t := range tools {
		medians[i] = median(times[i])
		fmt.Fprintf(&out, "  %-22s median %6.1fs  rounds %s\n", t.name, medians[i].Seconds(), secondsList(times[i]))
	}
	for i := 1; i < len(tools); i++ {
		fmt.Fprintf(&out, "  ratio builder build / %-20s %.2f\n", tools[i].name, medians[0].Seconds()/medians[i].Seconds())
	}
	fmt.Print(out.String())
	b.ReportMetric(medians[0].Seconds(), "archway-s")
	b.ReportMetric(medians[1].Seconds(), "buildah-s")
	b.ReportMetric(medians[2].Seconds(), "buildah-jobs4-s")
	b.ReportMetric(medians[0].Seconds()/medians[1].Seconds(), "ratio")
}

// runBuildahCLI builds ctxDir for platforms with the buildah CLI into a
// manifest list in a fresh store, pushes the list with its images to dest,
// and returns the wall time of both.
func runBuildahCLI(b *testing.B, buildah, ctxDir, platforms, dest string, jobs int) time.Duration {
	dir := b.TempDir()
	store := []string{"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"), "--storage-driver", "overlay"}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "TMPDIR="+filepath.Join(dir, "tmp"))
	run := func(args ...string) {
		cmd := exec.Command(buildah, append(slices.Clone(store), args...)...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("buildah %v: %v\n%s", args, err, out)
		}
	}
	start := time.Now()
	// As for archway's builder, build steps keep the limits the process
	// has (raising them needs CAP_SYS_RESOURCE). buildah 1.28 runs steps
	// with RLIMIT_NPROC at most 32768.
	run(append([]string{"build", "--isolation", "chroot", "--tls-verify=false", "--jobs", strconv.Itoa(jobs),
		"--ulimit", "nofile=" + hardLimit(unix.RLIMIT_NOFILE, 0), "--ulimit", "nproc=" + hardLimit(unix.RLIMIT_NPROC, 32768),
		"--platform", platforms, "--manifest", "bench-list", "-f", filepath.Join(ctxDir, "Dockerfile")}, ctxDir)...)
	run("manifest", "push", "--all", "--tls-verify=false", "bench-list", "docker://"+dest)
	took := time.Since(start)
	cmd := exec.Command(buildah, append(slices.Clone(store), "rm", "--all")...)
	cmd.Env = env
	_ = cmd.Run()
	// Unmount what the store still has mounted before the directory goes.
	_ = exec.Command("sh", "-c", "grep -o ' "+dir+"[^ ]*' /proc/mounts | xargs -r -n1 umount -l").Run()
	return took
}

// hardLimit formats the current hard limit of resource as SOFT:HARD,
// capped at max when max is not 0.
func hardLimit(resource int, max uint64) string {
	var lim unix.Rlimit
	if err := unix.Getrlimit(resource, &lim); err != nil {
		return "-1:-1"
	}
	v := lim.Max
	if max != 0 && v > max {
		v = max
	}
	return fmt.Sprintf("%d:%d", v, v)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func secondsList(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%.1fs", d.Seconds()))
	}
	return strings.Join(parts, " ")
}
