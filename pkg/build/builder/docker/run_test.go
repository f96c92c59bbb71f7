package docker

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/pkg/docker/config"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/image"
	"github.com/archway-build/archway/pkg/build/builder/report"
	"github.com/archway-build/archway/pkg/build/builder/source"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// reporter records what the flow reports.
type reporter struct {
	mu       sync.Mutex
	calls    []string
	complete *report.Result
	failure  *report.Failure
	// completeErr fails Complete.
	completeErr error
	// runningWait, when set, holds Running until it is closed, or for
	// 10 s, after which Running is recorded as "Running (waited)".
	runningWait chan struct{}
	// runningBegan, when set, is closed when Running is called.
	runningBegan chan struct{}
}

func (r *reporter) Running(context.Context) error {
	if r.runningBegan != nil {
		close(r.runningBegan)
	}
	if r.runningWait != nil {
		select {
		case <-r.runningWait:
		case <-time.After(10 * time.Second):
			r.mu.Lock()
			defer r.mu.Unlock()
			r.calls = append(r.calls, "Running (waited)")
			return nil
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "Running")
	return nil
}

func (r *reporter) Complete(_ context.Context, res report.Result) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "Complete")
	r.complete = &res
	return r.completeErr
}

func (r *reporter) Failed(_ context.Context, f report.Failure) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, "Failed")
	r.failure = &f
	return nil
}

// builder plays the image builder.
type builder struct {
	req    image.Request
	dest   string
	err    error
	closed bool
	// block makes BuildAndPush wait until ctx ends (a build a signal
	// stops).
	block bool
	// reused plays a result reused from the layer cache: no step runs.
	reused bool
	// configAuth is the credentials PlatformConfig read each role with.
	configAuth map[string]registry.AuthFile
}

func (b *builder) BuildAndPush(ctx context.Context, req image.Request, dest string, _ registry.AuthFile) (image.Output, error) {
	b.req, b.dest = req, dest
	if !b.reused {
		if req.Steps != nil {
			req.Steps()
		}
		_, _ = req.Out.Write([]byte("STEP 1/2: FROM busybox\nSTEP 2/2: RUN make\n"))
	}
	if b.block {
		<-ctx.Done()
		return image.Output{}, &image.StageError{Stage: image.StageBuild, Err: ctx.Err()}
	}
	if b.err != nil {
		return image.Output{Build: image.Result{Duration: time.Second}}, b.err
	}
	return image.Output{
		Build:  image.Result{ImageID: "sha256:0123456789abcdef0123", Duration: time.Second},
		Pushed: image.Pushed{Duration: time.Second},
		Image: image.Image{Reference: dest + "@sha256:aa", Digest: "sha256:aa",
			Platform: ocispec.Platform{OS: req.Platform.OS, Architecture: req.Platform.Architecture, Variant: req.Platform.Variant}},
	}, nil
}

func (b *builder) PlatformConfig(_ context.Context, role, ref string, _ platform.Platform, auth registry.AuthFile) (image.PlatformImage, error) {
	if b.configAuth == nil {
		b.configAuth = map[string]registry.AuthFile{}
	}
	b.configAuth[role] = auth
	return image.PlatformImage{Reference: ref, Config: ocispec.ImageConfig{Labels: map[string]string{"io.openshift.s2i.scripts-url": "image:///usr/libexec/s2i"}}}, nil
}

func (b *builder) TempDir() string { return os.TempDir() }

func (b *builder) Close() error { b.closed = true; return nil }

// dockerfileBuild is a one-platform Build of an inline Dockerfile.
func dockerfileBuild() *buildv1.Build {
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Name: "app-1", Namespace: "team"}}
	b.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType,
		DockerStrategy: &buildv1.DockerBuildStrategy{BuildArgs: []corev1.EnvVar{{Name: "V", Value: "1"}}, NoCache: true}}
	b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceDockerfile, Dockerfile: ptr.To("FROM busybox\nRUN make\n")}
	b.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/team/app:v1-linux-arm64"}
	b.Spec.Platforms = []string{"linux/arm64"}
	return b
}

// fetched plays the source fetch: the inline Dockerfile in a context dir.
func fetched(_ context.Context, opts source.Options, dir string) (source.Fetched, error) {
	if opts.Source.Dockerfile == nil {
		return source.Fetched{}, &source.Error{Reason: buildv1.StatusReasonFetchSourceFailed, Err: errors.New("no source")}
	}
	return source.Fetched{Root: dir, ContextDir: dir, Dockerfile: filepath.Join(dir, "Dockerfile")}, nil
}

func newRun(t *testing.T, b *buildv1.Build, ib *builder) (*Run, *reporter, *strings.Builder) {
	t.Helper()
	target, err := TargetPlatform(b)
	if err != nil {
		t.Fatal(err)
	}
	rep, out := &reporter{}, &strings.Builder{}
	// A run points TMPDIR into its work directory, which the test removes.
	t.Setenv("TMPDIR", os.TempDir())
	termination := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(termination, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return &Run{
		Build: b, Target: target, Reporter: rep, Out: out,
		Options:    Options{WorkDir: t.TempDir(), Format: image.FormatDocker, TerminationLog: termination},
		NewBuilder: func(image.Config) (ImageBuilder, error) { return ib, nil },
		Fetch:      fetched,
	}, rep, out
}

func TestRunCompletes(t *testing.T) {
	ib := &builder{}
	run, rep, out := newRun(t, dockerfileBuild(), ib)
	if err := run.Do(context.Background()); err != nil {
		t.Fatalf("Do: %v\n%s", err, out)
	}
	if strings.Join(rep.calls, ",") != "Running,Complete" {
		t.Fatalf("reported %v, want Running then Complete", rep.calls)
	}
	if want, _ := platform.Parse("linux/arm64"); ib.req.Platform != want {
		t.Errorf("built for %s, want %s", ib.req.Platform, want)
	}
	if ib.dest != "registry.example.com/team/app:v1-linux-arm64" || ib.req.Args["V"] != "1" || !ib.req.NoCache {
		t.Errorf("request %+v to %s: want the Build's output, build args and noCache", ib.req, ib.dest)
	}
	if ib.req.Cache != nil {
		t.Errorf("a layer cache %+v, want none: the Build has none", ib.req.Cache)
	}
	if ib.req.Labels["io.openshift.build.name"] != "app-1" {
		t.Errorf("image labels %v, want OpenShift's build labels", ib.req.Labels)
	}
	res := rep.complete
	if res.OutputReference != ib.dest || res.Image == nil || res.Image.Digest != "sha256:aa" {
		t.Errorf("reported %+v, want the pushed image", res)
	}
	var stages []string
	for _, s := range res.Stages {
		stages = append(stages, string(s.Name))
	}
	if got := strings.Join(stages, ","); got != "FetchInputs,Build,PushImage" {
		t.Errorf("stages %s, want FetchInputs,Build,PushImage", got)
	}
	if !ib.closed {
		t.Error("the image builder was not closed")
	}
	if !strings.Contains(out.String(), "Pushed registry.example.com/team/app:v1-linux-arm64@sha256:aa (linux/arm64") {
		t.Errorf("log:\n%s", out)
	}
}

func TestRunFails(t *testing.T) {
	tests := []struct {
		name        string
		build       func(*buildv1.Build)
		buildErr    error
		completeErr error
		wantReason  buildv1.StatusReason
		wantMsg     string
		wantBuilt   bool
	}{
		{
			name:       "a strategy docker-build does not run",
			build:      func(b *buildv1.Build) { b.Spec.Strategy.Type = "Custom" },
			wantReason: buildv1.StatusReasonUnsupportedBuildStrategy,
			wantMsg:    `strategy "Custom"`,
		},
		{
			name:       "an output that is not an image",
			build:      func(b *buildv1.Build) { b.Spec.Output.To.Kind = "ImageStreamTag" },
			wantReason: buildv1.StatusReasonInvalidOutputReference,
			wantMsg:    "ImageStreamTag",
		},
		{
			name:       "the source cannot be fetched",
			build:      func(b *buildv1.Build) { b.Spec.Source.Dockerfile = nil },
			wantReason: buildv1.StatusReasonFetchSourceFailed,
			wantMsg:    "no source",
		},
		{
			name:       "a RUN step fails",
			buildErr:   &image.StageError{Stage: image.StageBuild, Err: errors.New("RUN make: exit status 2")},
			wantReason: buildv1.StatusReasonDockerBuildFailed,
			wantMsg:    "exit status 2",
			wantBuilt:  true,
		},
		{
			name:        "the image was pushed but recording it failed",
			completeErr: errors.New("apiserver unreachable"),
			wantReason:  buildv1.StatusReasonGenericBuildFailed,
			wantMsg:     "recording it failed",
			wantBuilt:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := dockerfileBuild()
			if tt.build != nil {
				tt.build(b)
			}
			ib := &builder{err: tt.buildErr}
			run, rep, out := newRun(t, b, ib)
			rep.completeErr = tt.completeErr
			err := run.Do(context.Background())
			if err == nil || !strings.Contains(err.Error(), string(tt.wantReason)) {
				t.Fatalf("Do: %v, want a %s failure\n%s", err, tt.wantReason, out)
			}
			f := rep.failure
			if f == nil || f.Reason != tt.wantReason || !strings.Contains(f.Message, tt.wantMsg) {
				t.Fatalf("reported %+v, want %s saying %q", f, tt.wantReason, tt.wantMsg)
			}
			if (ib.dest != "") != tt.wantBuilt {
				t.Errorf("built: %v, want %v", ib.dest != "", tt.wantBuilt)
			}
			if tt.wantBuilt && !strings.Contains(f.LogSnippet, "RUN make") {
				t.Errorf("log snippet %q, want the end of the build's log", f.LogSnippet)
			}
			msg, err := os.ReadFile(run.Options.TerminationLog)
			if err != nil || !strings.HasPrefix(string(msg), string(tt.wantReason)+": ") {
				t.Errorf("termination message %q (%v), want it to start with the reason", msg, err)
			}
		})
	}
}

// TestRunStoppedBySignal: a build a signal stops (its pod is being deleted)
// reports nothing; the controller says what became of the platform.
func TestRunStoppedBySignal(t *testing.T) {
	ib := &builder{block: true}
	run, rep, out := newRun(t, dockerfileBuild(), ib)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run.Do(ctx) }()
	cancel()
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("Do: %v, want interrupted\n%s", err, out)
	}
	if strings.Join(rep.calls, ",") != "Running" {
		t.Errorf("reported %v after a signal, want only Running", rep.calls)
	}
}

// TestRunRedactsURICredentials: a Git source whose URI carries credentials
// and cannot be fetched fails without showing them: not in the build log,
// the status message and log snippet the Build records (and the controller's
// events repeat), nor the termination message.
func TestRunRedactsURICredentials(t *testing.T) {
	for _, uri := range []string{
		"http://ada:s3cret-pw@127.0.0.1:1/app.git",
		"http://s3cret-pw@127.0.0.1:1/app.git",
		"ftp://ada:s3cret-pw@127.0.0.1:1/app.git",
	} {
		t.Run(uri, func(t *testing.T) {
			b := dockerfileBuild()
			b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: uri, Ref: "main"}}
			run, rep, out := newRun(t, b, &builder{})
			run.Fetch = nil // the real fetch
			if err := run.Do(context.Background()); err == nil || strings.Contains(err.Error(), "s3cret-pw") {
				t.Fatalf("Do: %v, want a failure without the password", err)
			}
			f := rep.failure
			if f == nil || f.Reason != buildv1.StatusReasonFetchSourceFailed {
				t.Fatalf("reported %+v, want FetchSourceFailed", f)
			}
			term, _ := os.ReadFile(run.Options.TerminationLog)
			for where, text := range map[string]string{"log": out.String(), "message": f.Message, "log snippet": f.LogSnippet, "termination message": string(term)} {
				if strings.Contains(text, "s3cret-pw") {
					t.Errorf("the %s shows the password: %s", where, text)
				}
			}
			if !strings.Contains(out.String()+f.Message, "127.0.0.1:1/app.git") {
				t.Errorf("neither the log nor the message names the repository:\n%s\n%s", out, f.Message)
			}
		})
	}
}

// TestRunLayerCache: a Build with a registry layer cache builds with the
// platform's cache repository next to its output, reached with the push
// secret.
func TestRunLayerCache(t *testing.T) {
	ib := &builder{}
	b := dockerfileBuild()
	b.Spec.Strategy.DockerStrategy.LayerCache = &buildv1.LayerCache{Mode: buildv1.LayerCacheRegistry}
	run, _, out := newRun(t, b, ib)
	push := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(push, []byte(`{"auths":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	run.Options.PushAuthDir = push
	if err := run.Do(context.Background()); err != nil {
		t.Fatalf("Do: %v\n%s", err, out)
	}
	want := image.Cache{Repository: "registry.example.com/team/app-cache-linux-arm64", Auth: registry.AuthFile{Path: push}}
	if ib.req.Cache == nil || *ib.req.Cache != want {
		t.Errorf("cache %+v, want %+v", ib.req.Cache, want)
	}
	if !strings.Contains(out.String(), "Layer cache: registry.example.com/team/app-cache-linux-arm64") {
		t.Errorf("log:\n%s", out)
	}
}

// TestRunRemovesBinaryInput: the only reader of a binary input (the
// controller marks its copy of the Build) removes the input's tag however
// the build ends, with a context a signal has not cancelled; a platform's
// pod of a multi-platform Build leaves it to the manifest-list pod, and an
// artifact outside the output's repository is never untagged.
func TestRunRemovesBinaryInput(t *testing.T) {
	const repo = "127.0.0.1:1/team/app" // a closed port: the download fails at once
	dgst := "sha256:" + strings.Repeat("ab", 32)
	binaryBuild := func(annotate bool, artifactRepo string) *buildv1.Build {
		b := dockerfileBuild()
		b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceBinary, Binary: &buildv1.BinaryBuildSource{Artifact: artifactRepo + "@" + dgst}}
		b.Spec.Output.To.Name = repo + ":v1"
		if annotate {
			b.Annotations = map[string]string{buildv1.BinaryInputReaderAnnotation: buildv1.BinaryInputOnlyReader}
		}
		return b
	}
	tests := []struct {
		name   string
		build  *buildv1.Build
		signal bool
		want   []string
	}{
		{name: "only reader, build failed fetching", build: binaryBuild(true, repo), want: []string{repo + ":sha256-" + strings.Repeat("ab", 32) + ".binary"}},
		{name: "only reader stopped by a signal", build: binaryBuild(true, repo), signal: true, want: []string{repo + ":sha256-" + strings.Repeat("ab", 32) + ".binary"}},
		{name: "a platform of a multi-platform Build", build: binaryBuild(false, repo)},
		{name: "artifact in another repository", build: binaryBuild(true, "127.0.0.1:1/team/other")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, _, out := newRun(t, tt.build, &builder{})
			var untagged []string
			run.Untag = func(ctx context.Context, _ registry.Access, refs ...string) error {
				if ctx.Err() != nil {
					t.Errorf("untag with a cancelled context: %v", ctx.Err())
				}
				untagged = append(untagged, refs...)
				return nil
			}
			ctx, cancel := context.WithCancel(context.Background())
			if tt.signal {
				cancel()
			}
			defer cancel()
			_ = run.Do(ctx)
			if strings.Join(untagged, ",") != strings.Join(tt.want, ",") {
				t.Errorf("untagged %v, want %v; log:\n%s", untagged, tt.want, out)
			}
		})
	}
}

// TestRunStartsConcurrently checks that a build pod does not wait for one
// start-up step to begin the next: the opening of the image builder (its
// container store) and the source fetch run at once (each is held here
// until the other has begun), and the outcome is still reported after
// Running (reported when the steps begin), the builder closed.
func TestRunStartsConcurrently(t *testing.T) {
	ib := &builder{}
	run, rep, out := newRun(t, dockerfileBuild(), ib)
	fetching, opening := make(chan struct{}), make(chan struct{})
	rep.runningWait = fetching
	waitFor := func(ch chan struct{}, what string) error {
		select {
		case <-ch:
			return nil
		case <-time.After(10 * time.Second):
			return fmt.Errorf("%s did not begin while this step waited: the start-up steps run one after the other", what)
		}
	}
	run.NewBuilder = func(image.Config) (ImageBuilder, error) {
		close(opening)
		if err := waitFor(fetching, "the source fetch"); err != nil {
			return nil, err
		}
		return ib, nil
	}
	run.Fetch = func(ctx context.Context, opts source.Options, dir string) (source.Fetched, error) {
		close(fetching)
		if err := waitFor(opening, "the opening of the image builder"); err != nil {
			return source.Fetched{}, err
		}
		return fetched(ctx, opts, dir)
	}
	if err := run.Do(context.Background()); err != nil {
		t.Fatalf("Do: %v\n%s", err, out)
	}
	if strings.Join(rep.calls, ",") != "Running,Complete" {
		t.Fatalf("reported %v, want Running then Complete", rep.calls)
	}
	if !ib.closed {
		t.Error("the image builder was not closed")
	}
}

// TestRunFetchFailsBuilderClosed checks that a failed fetch still waits for
// the image builder opened beside it and closes it (its store holds
// mounts), and reports Failed alone: no step began.
func TestRunFetchFailsBuilderClosed(t *testing.T) {
	ib := &builder{}
	b := dockerfileBuild()
	b.Spec.Source.Dockerfile = nil
	run, rep, out := newRun(t, b, ib)
	run.Options.RunningAfter = time.Hour
	if err := run.Do(context.Background()); err == nil {
		t.Fatalf("Do succeeded without a source:\n%s", out)
	}
	if strings.Join(rep.calls, ",") != "Failed" {
		t.Fatalf("reported %v, want Failed alone", rep.calls)
	}
	if !ib.closed {
		t.Error("the image builder opened beside the failed fetch was not closed")
	}
}

// TestRunReusedResultReportedOnce checks that a platform whose result is
// reused from the layer cache (no step runs) before Running is due writes
// its entry once, Complete, rather than Running then Complete.
func TestRunReusedResultReportedOnce(t *testing.T) {
	ib := &builder{reused: true}
	run, rep, out := newRun(t, dockerfileBuild(), ib)
	run.Options.RunningAfter = time.Hour
	if err := run.Do(context.Background()); err != nil {
		t.Fatalf("Do: %v\n%s", err, out)
	}
	if strings.Join(rep.calls, ",") != "Complete" {
		t.Fatalf("reported %v, want Complete alone", rep.calls)
	}
}

// TestRunSlowStartReportsRunning checks that a pod that has worked for
// RunningAfter without beginning a step (a slow fetch) reports Running
// then, and that the outcome waits for that report: Complete comes after
// Running even while Running is slow to be applied.
func TestRunSlowStartReportsRunning(t *testing.T) {
	ib := &builder{reused: true}
	run, rep, out := newRun(t, dockerfileBuild(), ib)
	run.Options.RunningAfter = 10 * time.Millisecond
	began, release := make(chan struct{}), make(chan struct{})
	rep.runningBegan, rep.runningWait = began, release
	run.Fetch = func(ctx context.Context, opts source.Options, dir string) (source.Fetched, error) {
		select {
		case <-began:
		case <-time.After(10 * time.Second):
			return source.Fetched{}, errors.New("Running was not reported while the fetch took longer than RunningAfter")
		}
		return fetched(ctx, opts, dir)
	}
	run.NewBuilder = func(image.Config) (ImageBuilder, error) { return ib, nil }
	done := make(chan error, 1)
	go func() { done <- run.Do(context.Background()) }()
	// Running is held: Do must not end (nor report Complete) before it
	// is released.
	select {
	case err := <-done:
		t.Fatalf("Do ended (%v) while Running was still being applied; reported %v\n%s", err, rep.calls, out)
	case <-began:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Do: %v\n%s", err, out)
	}
	if strings.Join(rep.calls, ",") != "Running,Complete" {
		t.Fatalf("reported %v, want Running then Complete", rep.calls)
	}
}

// TestRunSourceStrategy runs a Source build: the image builder gets the
// Dockerfile source-to-image wrote FROM the builder image, with the
// strategy's env in it rather than in the request, and the build pulls
// with the strategy's forcePull.
func TestRunSourceStrategy(t *testing.T) {
	b := dockerfileBuild()
	b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceNone}
	b.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType, SourceStrategy: &buildv1.SourceBuildStrategy{
		From: corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/s2i/builder@sha256:" + strings.Repeat("a", 64)},
		Env:  []corev1.EnvVar{{Name: "GREETING", Value: "hi"}}, ForcePull: true,
	}}
	ib := &builder{}
	run, rep, out := newRun(t, b, ib)
	run.Fetch = func(_ context.Context, opts source.Options, dir string) (source.Fetched, error) {
		if !opts.NoDockerfile {
			t.Error("a Source build's fetch looks for a Dockerfile")
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return source.Fetched{}, err
		}
		return source.Fetched{Root: dir, ContextDir: dir}, os.WriteFile(filepath.Join(dir, "main.txt"), []byte("x"), 0o644)
	}
	if err := run.Do(t.Context()); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.complete == nil {
		t.Fatalf("not complete: %v", rep.calls)
	}
	df, err := os.ReadFile(ib.req.Dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FROM " + b.Spec.Strategy.SourceStrategy.From.Name + "\n", `ENV GREETING="hi"`, "RUN /usr/libexec/s2i/assemble\n"} {
		if !strings.Contains(string(df), want) {
			t.Errorf("the Dockerfile has no %q:\n%s", want, df)
		}
	}
	if len(ib.req.Env) != 0 || !ib.req.ForcePull || ib.req.ContextDir != filepath.Dir(ib.req.Dockerfile) {
		t.Errorf("request env %v, forcePull %v, context %s, Dockerfile %s", ib.req.Env, ib.req.ForcePull, ib.req.ContextDir, ib.req.Dockerfile)
	}
}

// TestRunIncrementalPushCredentials: an incremental Source build reads its
// previous image, which is in the output's repository, with the push
// secret's credential, as OpenShift's builder pulls it, and the build pulls
// it with that credential too; everything else is pulled with the pull
// secret's.
func TestRunIncrementalPushCredentials(t *testing.T) {
	b := dockerfileBuild()
	b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceNone}
	b.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType, SourceStrategy: &buildv1.SourceBuildStrategy{
		From:        corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/s2i/builder:1"},
		Incremental: ptr.To(true),
	}}
	writeAuth := func(user string) string {
		dir := t.TempDir()
		data := `{"auths":{"registry.example.com":{"auth":"` + base64.StdEncoding.EncodeToString([]byte(user+":pw")) + `"}}}`
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	ib := &builder{}
	run, rep, out := newRun(t, b, ib)
	run.Options.PullAuthDir, run.Options.PushAuthDir = writeAuth("puller"), writeAuth("pusher")
	run.Fetch = func(_ context.Context, _ source.Options, dir string) (source.Fetched, error) {
		return source.Fetched{Root: dir, ContextDir: dir}, os.MkdirAll(dir, 0o755)
	}
	if err := run.Do(t.Context()); err != nil || rep.complete == nil {
		t.Fatalf("%v %v\n%s", err, rep.calls, out)
	}
	userFor := func(auth registry.AuthFile, ref string) string {
		t.Helper()
		named, err := reference.ParseNormalizedNamed(ref)
		if err != nil {
			t.Fatal(err)
		}
		cred, err := config.GetCredentialsForRef(registry.Access{AuthFile: auth}.SystemContext(""), named)
		if err != nil {
			t.Fatal(err)
		}
		return cred.Username
	}
	prev, builderImage := ib.configAuth["previous image"], ib.configAuth["builder image"]
	if got := userFor(prev, b.Spec.Output.To.Name); got != "pusher" {
		t.Errorf("the previous image was read as %q, want the push secret's pusher", got)
	}
	if got := userFor(builderImage, "registry.example.com/s2i/builder:1"); got != "puller" {
		t.Errorf("the builder image was read as %q, want the pull secret's puller", got)
	}
	if got := userFor(ib.req.PullAuth, b.Spec.Output.To.Name); got != "pusher" {
		t.Errorf("the build pulls the previous image as %q, want pusher", got)
	}
	if got := userFor(ib.req.PullAuth, "registry.example.com/s2i/builder:1"); got != "puller" {
		t.Errorf("the build pulls the builder image as %q, want puller", got)
	}
	df, err := os.ReadFile(ib.req.Dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(df), "FROM "+b.Spec.Output.To.Name+" as cached\n") {
		t.Errorf("the Dockerfile does not restore the previous image's artifacts:\n%s", df)
	}
}

// TestRunSourceSecrets: a Source build's source.secrets are not copied
// into the source (which goes into the image): the image builder gets them
// as secrets that the assemble step mounts.
func TestRunSourceSecrets(t *testing.T) {
	b := dockerfileBuild()
	b.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceNone,
		Secrets: []buildv1.SecretBuildSource{{Secret: corev1.LocalObjectReference{Name: "creds"}, DestinationDir: "creds"}}}
	b.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.SourceBuildStrategyType, SourceStrategy: &buildv1.SourceBuildStrategy{
		From: corev1.ObjectReference{Kind: "DockerImage", Name: "registry.example.com/s2i/builder:1"}}}
	secrets := t.TempDir()
	if err := os.MkdirAll(filepath.Join(secrets, "creds"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "creds", "token"), []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	ib := &builder{}
	run, rep, out := newRun(t, b, ib)
	run.Options.BuildSecretsDir = secrets
	run.Fetch = func(_ context.Context, opts source.Options, dir string) (source.Fetched, error) {
		if len(opts.Source.Secrets) != 0 {
			t.Errorf("the fetch copies source.secrets into the source: %v", opts.Source.Secrets)
		}
		return source.Fetched{Root: dir, ContextDir: dir}, os.MkdirAll(dir, 0o755)
	}
	if err := run.Do(t.Context()); err != nil || rep.complete == nil {
		t.Fatalf("%v %v\n%s", err, rep.calls, out)
	}
	if want := []string{"id=s2i-secret-0,src=" + filepath.Join(secrets, "creds", "token")}; !slices.Equal(ib.req.Secrets, want) {
		t.Errorf("request secrets %v, want %v", ib.req.Secrets, want)
	}
	if !strings.Contains(out.String(), "Secrets for assemble, left out of the image: /opt/app-root/src/creds/token\n") {
		t.Errorf("the log does not say where assemble finds the secrets:\n%s", out)
	}
	if len(b.Spec.Source.Secrets) != 1 {
		t.Errorf("the Build's source.secrets changed: %v", b.Spec.Source.Secrets)
	}
}
