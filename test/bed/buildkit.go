package bed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// BuildKit is a BuildKit daemon (buildkitd, pinned and built by `make
// tools`) that the builder benchmarks compare archway with: run as root
// with its runc worker (Debian's runc) and the overlayfs snapshotter, its
// RUN steps on the host's network, reaching the given registries over
// plain HTTP. Its state lives in a directory of its own, removed by Stop,
// so every daemon starts cold.
type BuildKit struct {
	// Addr is the daemon's socket address (unix://...).
	Addr string

	dir      string
	buildctl string
	cmd      *exec.Cmd
	log      *os.File
	done     chan error
}

// StartBuildKit starts a buildkitd that reaches insecureRegistries (hosts
// such as the bed's registry) over plain HTTP, and waits until it answers.
func StartBuildKit(ctx context.Context, insecureRegistries ...string) (*BuildKit, error) {
	buildkitd, err1 := Tool("buildkitd")
	buildctl, err2 := Tool("buildctl")
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		return nil, fmt.Errorf("BuildKit's worker needs runc, which is not installed: run `make tools` (or `hack/tools.sh apt`): %w", err)
	}
	// A directory outside any test's, so that a mount left behind by a
	// failed stop cannot fail a test's cleanup.
	dir, err := os.MkdirTemp("", "archway-buildkitd-")
	if err != nil {
		return nil, err
	}
	k := &BuildKit{dir: dir, buildctl: buildctl, Addr: "unix://" + filepath.Join(dir, "buildkitd.sock"), done: make(chan error, 1)}
	var config strings.Builder
	for _, host := range insecureRegistries {
		fmt.Fprintf(&config, "[registry.%q]\n  http = true\n  insecure = true\n", host)
	}
	if err := os.WriteFile(filepath.Join(dir, "buildkitd.toml"), []byte(config.String()), 0o600); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	if k.log, err = os.Create(filepath.Join(dir, "buildkitd.log")); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	k.cmd = exec.Command(buildkitd,
		"--root", filepath.Join(dir, "root"),
		"--addr", k.Addr,
		"--config", filepath.Join(dir, "buildkitd.toml"),
		"--oci-worker=true", "--containerd-worker=false",
		"--oci-worker-binary", runc,
		"--oci-worker-net", "host",
		"--oci-worker-snapshotter", "overlayfs")
	k.cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "TMPDIR="+dir)
	k.cmd.Stdout, k.cmd.Stderr = k.log, k.log
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := k.cmd.Start(); err != nil {
		_ = k.log.Close()
		return nil, errors.Join(fmt.Errorf("starting buildkitd: %w", err), os.RemoveAll(dir))
	}
	go func() { k.done <- k.cmd.Wait() }()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		out, err := exec.CommandContext(ctx, buildctl, "--addr", k.Addr, "debug", "workers").CombinedOutput()
		if err == nil && bytes.Contains(out, []byte("linux/")) {
			return k, nil
		}
		select {
		case err := <-k.done:
			k.done <- err
			tail := k.LogTail()
			return nil, errors.Join(fmt.Errorf("buildkitd exited (%w):\n%s", err, tail), k.Stop())
		case <-ctx.Done():
			tail := k.LogTail()
			return nil, errors.Join(fmt.Errorf("buildkitd did not answer within a minute (%s):\n%s", out, tail), k.Stop())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// BuildKitBuild is one `buildctl build` with the Dockerfile frontend.
type BuildKitBuild struct {
	// Context is the build context directory, holding the Dockerfile.
	Context string
	// Platforms are the platforms to build ("linux/arm64", ...).
	Platforms []string
	// BuildArgs are the Dockerfile's build args.
	BuildArgs map[string]string
	// Output is the reference the image (an index for more than one
	// platform) is pushed to.
	Output string
	// CacheTo, when set, exports the build's cache to this registry
	// reference (type=registry, mode=max: every step's layers); CacheFrom
	// imports the cache from one.
	CacheTo, CacheFrom string
}

// BuildKitResult is what one build took, from BuildKit's own progress
// events.
type BuildKitResult struct {
	// Wall is the whole `buildctl build`, from start to exit.
	Wall time.Duration
	// CPU is the CPU time (user and system) of buildctl and what buildkitd
	// spent meanwhile, with the children it waited for (runc and the build
	// steps under it): the work of the build even when other work shares
	// the machine, which Wall is not.
	CPU time.Duration
	// Platforms is, for each platform, the span from the start of its
	// first step to the end of its last ([linux/arm64 1/2] ...), the
	// steps that are not the platform's own (context transfer, index
	// resolution, export and push) left out.
	Platforms map[string]time.Duration
	// Steps and CachedSteps count the Dockerfile's steps of every
	// platform other than FROM (RUN, COPY...) and those BuildKit took from
	// its cache. (A FROM is never reported cached: BuildKit resolves the
	// base and, when every later step is cached, pulls none of it.)
	Steps, CachedSteps int
	// Export is the span of the export steps: the image, its push, the
	// cache export.
	Export time.Duration
}

// platformStep matches BuildKit's names of a Dockerfile step of one
// platform: "[linux/arm64 2/3] RUN ...", or "[stage linux/arm64 2/3] ...".
var platformStep = regexp.MustCompile(`^\[(?:\S+ )?([a-z0-9]+/[a-z0-9_]+(?:/[a-z0-9]+)?) \d+/\d+\]`)

// Build runs b and reads its progress events (buildctl's rawjson) into a
// BuildKitResult.
func (k *BuildKit) Build(ctx context.Context, b BuildKitBuild) (BuildKitResult, error) {
	args := []string{"--addr", k.Addr, "build",
		"--frontend", "dockerfile.v0",
		"--local", "context=" + b.Context, "--local", "dockerfile=" + b.Context,
		"--opt", "platform=" + strings.Join(b.Platforms, ","),
		"--output", "type=image,name=" + b.Output + ",push=true,registry.insecure=true",
		"--progress", "rawjson"}
	keys := make([]string, 0, len(b.BuildArgs))
	for key := range b.BuildArgs {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		args = append(args, "--opt", "build-arg:"+key+"="+b.BuildArgs[key])
	}
	if b.CacheTo != "" {
		args = append(args, "--export-cache", "type=registry,mode=max,registry.insecure=true,ref="+b.CacheTo)
	}
	if b.CacheFrom != "" {
		args = append(args, "--import-cache", "type=registry,registry.insecure=true,ref="+b.CacheFrom)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, k.buildctl, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	daemonBefore, cpuErr := k.cpu()
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	daemonAfter, cpuErr2 := k.cpu()
	if err == nil {
		err = errors.Join(cpuErr, cpuErr2)
	}
	if err != nil {
		return BuildKitResult{}, fmt.Errorf("buildctl build of %s: %w\n%s\nbuildkitd:\n%s", b.Context, err, lastBytes(stdout.String()+stderr.String(), 4000), k.LogTail())
	}
	res, err := readBuildKitProgress(&stderr)
	if err != nil {
		return BuildKitResult{}, fmt.Errorf("reading buildctl's progress: %w", err)
	}
	res.Wall = wall
	res.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime() + daemonAfter - daemonBefore
	return res, nil
}

// cpu returns the CPU time buildkitd has used so far, its own and that of
// the children it waited for, from /proc/PID/stat: utime, stime, cutime
// and cstime, in USER_HZ ticks (100 a second on Linux).
func (k *BuildKit) cpu() (time.Duration, error) {
	path := fmt.Sprintf("/proc/%d/stat", k.cmd.Process.Pid)
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("buildkitd's CPU time: %w", err)
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// after it, where utime, the 14th field, is the 12th.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(fields) < 15 {
		return 0, fmt.Errorf("%s has %d fields after the name", path, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:15] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100, nil
}

// readBuildKitProgress folds buildctl's rawjson progress (a stream of
// SolveStatus objects, each vertex reported again as it changes) into a
// BuildKitResult, Wall unset.
func readBuildKitProgress(r io.Reader) (BuildKitResult, error) {
	type vertex struct {
		Digest    string     `json:"digest"`
		Name      string     `json:"name"`
		Started   *time.Time `json:"started"`
		Completed *time.Time `json:"completed"`
		Cached    bool       `json:"cached"`
	}
	latest := map[string]vertex{}
	dec := json.NewDecoder(r)
	for {
		var status struct {
			Vertexes []vertex `json:"vertexes"`
		}
		if err := dec.Decode(&status); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return BuildKitResult{}, err
		}
		for _, v := range status.Vertexes {
			latest[v.Digest] = v
		}
	}
	type span struct{ first, last time.Time }
	spans := map[string]*span{}
	var export span
	widen := func(s *span, v vertex) {
		if v.Started != nil && (s.first.IsZero() || v.Started.Before(s.first)) {
			s.first = *v.Started
		}
		if v.Completed != nil && v.Completed.After(s.last) {
			s.last = *v.Completed
		}
	}
	res := BuildKitResult{Platforms: map[string]time.Duration{}}
	for _, v := range latest {
		if m := platformStep.FindStringSubmatch(v.Name); m != nil {
			if _, step, _ := strings.Cut(v.Name, "] "); !strings.HasPrefix(step, "FROM ") {
				res.Steps++
				if v.Cached {
					res.CachedSteps++
				}
			}
			s := spans[m[1]]
			if s == nil {
				s = &span{}
				spans[m[1]] = s
			}
			widen(s, v)
			continue
		}
		if strings.HasPrefix(v.Name, "exporting ") || strings.HasPrefix(v.Name, "pushing ") {
			widen(&export, v)
		}
	}
	for p, s := range spans {
		if !s.first.IsZero() && s.last.After(s.first) {
			res.Platforms[p] = s.last.Sub(s.first)
		} else {
			res.Platforms[p] = 0
		}
	}
	if !export.first.IsZero() && export.last.After(export.first) {
		res.Export = export.last.Sub(export.first)
	}
	return res, nil
}

// Stop ends the daemon (SIGTERM, SIGKILL to its process group after 30 s),
// unmounts what it left mounted and removes its state.
func (k *BuildKit) Stop() error {
	if k.cmd.Process != nil {
		_ = k.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-k.done:
			k.done <- err
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL)
			k.done <- <-k.done
		}
	}
	_ = k.log.Close()
	UnmountUnder(k.dir)
	return os.RemoveAll(k.dir)
}

// LogTail is the end of the daemon's log, for error messages.
func (k *BuildKit) LogTail() string {
	raw, _ := os.ReadFile(k.log.Name())
	return lastBytes(string(raw), 4000)
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// UnmountUnder lazily unmounts every mount below dir, deepest first.
func UnmountUnder(dir string) {
	raw, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return
	}
	var points []string
	for line := range strings.SplitSeq(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			points = append(points, f[1])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}
