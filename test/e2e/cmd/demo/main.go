// Command demo shows archway to someone who has never seen it (`make
// demo`): it starts a one-machine cluster (the bed), runs build-controller,
// applies the sample BuildConfig from examples/demo, starts its build with
// kubectl archway start-build, builds it for four
// architectures with a live progress table, and ends with the image index
// it pushed. It stops everything it started when it ends or on Ctrl-C; with
// --keep it leaves the bed up until Ctrl-C and says how to look around.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build"
	"github.com/archway-build/archway/pkg/build/cli"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

func main() {
	keep := flag.Bool("keep", false, "keep the bed running after the build, until Ctrl-C")
	binDir := flag.String("bin-dir", "bin", "directory holding builder and build-controller (built by `make build`)")
	flag.Parse()
	logf.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *binDir, *keep); err != nil {
		if ctx.Err() != nil {
			fmt.Println("\nInterrupted: everything the demo started is stopped.")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "\ndemo failed:", err)
		os.Exit(1)
	}
}

// step prints a progress line and returns a function printing how long the
// step took.
func step(format string, args ...any) func() {
	start := time.Now()
	fmt.Printf("==> "+format+" ... ", args...)
	return func() { fmt.Printf("done (%.1fs)\n", time.Since(start).Seconds()) }
}

func run(ctx context.Context, binDir string, keep bool) error {
	total := time.Now()
	bins := framework.Binaries{Builder: filepath.Join(binDir, "builder"), Controller: filepath.Join(binDir, "build-controller")}
	for _, b := range []string{bins.Builder, bins.Controller} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s is missing: run `make build` (or `make demo`, which builds it)", b)
		}
	}
	var err error
	if bins.Builder, err = filepath.Abs(bins.Builder); err != nil {
		return err
	}
	if bins.Controller, err = filepath.Abs(bins.Controller); err != nil {
		return err
	}

	done := step("Starting a one-machine cluster: kube-apiserver, kube-scheduler, 4 nodes (amd64, arm64, ppc64le, s390x), a registry, build-controller")
	bedLog := &strings.Builder{}
	env, err := framework.Start(ctx, framework.Options{Binaries: bins, Bed: bed.Options{Log: bedLog}})
	if err != nil {
		return err
	}
	defer func() {
		d := step("Stopping everything the demo started")
		env.Stop()
		d()
	}()
	done()
	b := env.Bed
	fmt.Printf("    The nodes are simulated (kwok); build pods bound to them run as processes here, foreign\n" +
		"    architectures under qemu. archway's CRDs (Build, BuildConfig) come from manifests/crd/bases.\n")

	done = step("Making a git repository from examples/demo/app")
	repoDir := filepath.Join(b.Dir, "demo-repo")
	files, err := readDir(filepath.Join(bed.RepoRoot(), "examples", "demo", "app"))
	if err != nil {
		return err
	}
	uri, err := framework.GitRepo(repoDir, files)
	if err != nil {
		return err
	}
	done()

	done = step("Applying examples/demo/buildconfig.yaml")
	raw, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "examples", "demo", "buildconfig.yaml"))
	if err != nil {
		return err
	}
	text := os.Expand(string(raw), func(name string) string {
		switch name {
		case "GIT_URI":
			return uri
		case "REGISTRY":
			return b.Registry.Host
		}
		return "${" + name + "}"
	})
	bc := &buildv1.BuildConfig{}
	if err := yaml.UnmarshalStrict([]byte(text), bc); err != nil {
		return fmt.Errorf("examples/demo/buildconfig.yaml: %w", err)
	}
	bc.Namespace = "default"
	if err := b.Client.Create(ctx, bc); err != nil {
		return err
	}
	done()

	watcher, err := client.NewWithWatch(b.Config, client.Options{Scheme: bed.NewScheme()})
	if err != nil {
		return err
	}
	// The build is started as a user does: kubectl archway start-build
	// (the plugin's command, run in this process against the bed).
	name := instantiate.Name(bc.Name, 1)
	bd := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: bc.Namespace, Name: name}}
	// The watches end before the bed stops: an open watch makes the
	// apiserver's shutdown wait.
	watchCtx, endWatch := context.WithCancel(ctx)
	defer endWatch()
	tl, err := framework.WatchBuild(watchCtx, watcher, bc.Namespace, name)
	if err != nil {
		return err
	}
	fmt.Printf("==> kubectl archway start-build %s -n %s   (build %s for %s)\n", bc.Name, bc.Namespace, name, strings.Join(bc.Spec.Platforms, ", "))
	tl.Created = time.Now()
	var started bytes.Buffer
	plugin := cli.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &started, ErrOut: os.Stderr})
	plugin.SetArgs([]string{"start-build", bc.Name, "-n", bc.Namespace, "--kubeconfig", b.Kubeconfig})
	if err := plugin.ExecuteContext(ctx); err != nil {
		return fmt.Errorf("kubectl archway start-build: %w", err)
	}
	fmt.Printf("    %s\n", strings.TrimSpace(started.String()))
	table := newTable(os.Stdout, bd.Name, bc.Spec.Platforms)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for finished := false; !finished; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tl.Done():
			finished = true
		case <-tick.C:
		}
		table.draw(tl)
	}
	final := &buildv1.Build{}
	if err := b.Client.Get(ctx, client.ObjectKeyFromObject(bd), final); err != nil {
		return err
	}
	table.draw(tl)
	endWatch()
	summary(final, tl)
	if final.Status.Phase != buildv1.BuildPhaseComplete {
		return fmt.Errorf("build %s ended %s: %s", final.Name, final.Status.Phase, final.Status.Message)
	}
	fmt.Printf("\nThe whole demo took %.0fs.\n", time.Since(total).Seconds())
	if keep {
		lookAround(env, final)
		<-ctx.Done()
		fmt.Println()
	}
	return nil
}

// readDir reads every file under dir, by path relative to it.
func readDir(dir string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files[rel] = string(data)
		return err
	})
	return files, err
}

// table is the live per-platform progress table; on a terminal it is
// redrawn in place, elsewhere printed again only when it changes.
type table struct {
	out       io.Writer
	build     string
	platforms []string
	tty       bool
	lines     int
	last      string
}

func newTable(out *os.File, build string, platforms []string) *table {
	st, err := out.Stat()
	return &table{out: out, build: build, platforms: platforms, tty: err == nil && st.Mode()&os.ModeCharDevice != 0}
}

func (t *table) draw(tl *framework.Timeline) {
	b, _ := tl.Build()
	ent := map[string]buildv1.BuildStatusPlatform{}
	phase := "New"
	if b != nil {
		for _, e := range b.Status.Platforms {
			ent[e.Platform] = e
		}
		if b.Status.Phase != "" {
			phase = string(b.Status.Phase)
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "    %-15s %-10s %-16s %s\n", "PLATFORM", "PHASE", "NODE", "DURATION")
	row := func(name, podName, entryPhase string) {
		pt, seen := tl.Pod(podName)
		ph, node, dur := "Waiting", "-", "-"
		if seen {
			ph = "Pending"
			if pt.Node != "" {
				node, ph = pt.Node, "Scheduled"
			}
			if !pt.Running.IsZero() {
				ph = "Running"
				end := pt.Finished
				if end.IsZero() {
					end = time.Now()
				}
				dur = fmt.Sprintf("%.1fs", end.Sub(pt.Running).Seconds())
			}
			switch pt.Phase {
			case corev1.PodSucceeded:
				ph = "Complete"
			case corev1.PodFailed:
				ph = "Failed"
			}
		}
		if entryPhase == string(buildv1.BuildPhaseComplete) || entryPhase == string(buildv1.BuildPhaseFailed) {
			ph = entryPhase
		}
		fmt.Fprintf(&sb, "    %-15s %-10s %-16s %s\n", name, ph, node, dur)
	}
	for _, p := range t.platforms {
		row(p, build.PlatformPodName(t.build, p), string(ent[p].Phase))
	}
	row("(image index)", build.ManifestListPodName(t.build), "")
	fmt.Fprintf(&sb, "    build %s: %s, %.0fs so far\n", t.build, phase, time.Since(tl.Created).Seconds())
	text := sb.String()
	if t.tty {
		if t.lines > 0 {
			fmt.Fprintf(t.out, "\033[%dA", t.lines)
		}
		for _, l := range strings.SplitAfter(text, "\n") {
			if l != "" {
				fmt.Fprint(t.out, "\033[2K"+l)
			}
		}
		t.lines = strings.Count(text, "\n")
		return
	}
	// Without a terminal, print the table only when more than the clock
	// changed.
	key := text[:strings.LastIndex(text, ",")]
	key = stripDurations(key)
	if key != t.last {
		fmt.Fprintln(t.out, text)
		t.last = key
	}
}

// stripDurations drops the last column, so a log shows state changes only.
func stripDurations(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(l)
		if len(f) > 3 {
			f = f[:len(f)-1]
		}
		out = append(out, strings.Join(f, " "))
	}
	return strings.Join(out, "\n")
}

// summary prints the index, its platforms and digests, and the durations.
func summary(b *buildv1.Build, tl *framework.Timeline) {
	_, end := tl.Build()
	fmt.Printf("\nBuild %s is %s", b.Name, b.Status.Phase)
	if b.Status.Message != "" {
		fmt.Printf(": %s", b.Status.Message)
	}
	fmt.Println(".")
	if b.Status.Phase != buildv1.BuildPhaseComplete {
		return
	}
	index := b.Status.OutputDockerImageReference
	if index == "" && b.Spec.Output.To != nil {
		index = b.Spec.Output.To.Name
	}
	fmt.Printf("\nImage index: %s\n", index)
	if d := b.Status.Output.To; d != nil && d.ImageDigest != "" {
		fmt.Printf("     digest: %s\n", d.ImageDigest)
	}
	fmt.Printf("\n    %-15s %-73s %s\n", "PLATFORM", "IMAGE DIGEST", "BUILD TIME")
	for _, e := range b.Status.Platforms {
		dig := "-"
		if e.Output != nil {
			dig = e.Output.ImageDigest
		}
		took := "-"
		if pt, ok := tl.Pod(build.PlatformPodName(b.Name, e.Platform)); ok && !pt.Finished.IsZero() {
			took = fmt.Sprintf("%.1fs", pt.Finished.Sub(pt.Running).Seconds())
		}
		fmt.Printf("    %-15s %-73s %s\n", e.Platform, dig, took)
	}
	fmt.Printf("\nThe whole build took %.1fs, from creating the Build to Complete (platforms build in parallel).\n", end.Sub(tl.Created).Seconds())
	if o, err := tl.Overhead(b.Name, b.Spec.Platforms); err == nil {
		fmt.Printf("archway's own share (scheduling, pod start-up, the index): %.1fs.\n", o.Total().Seconds())
	}
}

// lookAround prints how to inspect the kept bed.
func lookAround(env *framework.Env, b *buildv1.Build) {
	kubectl, err := bed.Tool("kubectl")
	if err != nil {
		kubectl = "kubectl"
	}
	sel := build.PodSelector(b.Name)
	fmt.Printf(`
The bed stays up until you press Ctrl-C. In another terminal:

    export KUBECONFIG=%s
    alias kubectl=%s
    kubectl get builds,buildconfigs
    kubectl get pods -l %s -o wide
    kubectl logs -l %s --prefix
    kubectl describe build %s
    curl -s http://%s/v2/demo/hello/tags/list

build-controller's log: %s
`, env.Bed.Kubeconfig, kubectl, sel, sel, b.Name, env.Bed.Registry.Host, env.ControllerLog)
}
