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
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/plugin"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/e2e/framework"
)

func main() {
	o := defineFlags(flag.CommandLine)
	flag.Parse()
	logf.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *o); err != nil {
		if ctx.Err() != nil {
			fmt.Println("\nInterrupted: everything the demo started is stopped.")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "\ndemo failed:", err)
		os.Exit(1)
	}
}

// defineFlags defines the demo's flags in fs (flag.CommandLine, which
// already holds controller-runtime's --kubeconfig).
func defineFlags(fs *flag.FlagSet) *options {
	o := &options{}
	fs.BoolVar(&o.keep, "keep", false, "keep the bed running after the build, until Ctrl-C")
	fs.StringVar(&o.binDir, "bin-dir", "bin", "directory holding builder and build-controller (built by `make build`)")
	fs.BoolVar(&o.install, "install", false, "install archway onto the bed with kubectl apply -k (manifests/default), every component a pod, instead of running build-controller as a process")
	fs.StringVar(&o.kubeconfig, "cluster", "", "the kubeconfig of a cluster where archway is installed: start no bed, only create the BuildConfig and build it (needs --git-uri and --registry)")
	fs.StringVar(&o.gitURI, "git-uri", "", "with --cluster: a git repository holding examples/demo/app (e.g. archway's own, with --context-dir examples/demo/app)")
	fs.StringVar(&o.contextDir, "context-dir", "", "with --cluster: the directory of the git repository to build")
	fs.StringVar(&o.registry, "registry", "", "with --cluster: where build pods push the image, as <registry>/demo/hello:latest")
	fs.StringVar(&o.baseImage, "base-image", "docker.io/library/busybox:latest", "with --cluster: a multi-arch base image the cluster's nodes can pull")
	fs.StringVar(&o.namespace, "namespace", "default", "with --cluster: the namespace of the BuildConfig")
	return o
}

// options are the demo's flags.
type options struct {
	binDir, kubeconfig, gitURI, contextDir, registry, baseImage, namespace string
	keep, install                                                          bool
}

// step prints a progress line and returns a function printing how long the
// step took.
func step(format string, args ...any) func() {
	start := time.Now()
	fmt.Printf("==> "+format+" ... ", args...)
	return func() { fmt.Printf("done (%.1fs)\n", time.Since(start).Seconds()) }
}

// target is the cluster the demo builds on, and what the BuildConfig
// names.
type target struct {
	kubeconfig string
	namespace  string
	gitURI     string
	contextDir string
	registry   string
	baseImage  string
	// lookAround prints how to look at the kept cluster; nil in --cluster mode.
	lookAround func(b *buildv1.Build)
}

func run(ctx context.Context, o options) error {
	total := time.Now()
	var (
		t   *target
		err error
	)
	switch {
	case o.kubeconfig != "":
		t, err = clusterTarget(o)
	case o.install:
		var stop func()
		t, stop, err = installTarget(ctx, o)
		if stop != nil {
			defer stop()
		}
	default:
		var stop func()
		t, stop, err = bedTarget(ctx, o)
		if stop != nil {
			defer stop()
		}
	}
	if err != nil {
		return err
	}
	final, err := demoBuild(ctx, t)
	if err != nil {
		return err
	}
	fmt.Printf("\nThe whole demo took %.0fs.\n", time.Since(total).Seconds())
	if o.keep && t.lookAround != nil {
		t.lookAround(final)
		<-ctx.Done()
		fmt.Println()
	}
	return nil
}

// binaries are the programs `make build` built into binDir.
func binaries(binDir string) (framework.Binaries, error) {
	bins := framework.Binaries{Builder: filepath.Join(binDir, "builder"), Controller: filepath.Join(binDir, "build-controller")}
	for _, b := range []string{bins.Builder, bins.Controller} {
		if _, err := os.Stat(b); err != nil {
			return bins, fmt.Errorf("%s is missing: run `make build` (or `make demo`, which builds it)", b)
		}
	}
	var err error
	if bins.Builder, err = filepath.Abs(bins.Builder); err != nil {
		return bins, err
	}
	bins.Controller, err = filepath.Abs(bins.Controller)
	return bins, err
}

// bedTarget starts the bed with build-controller as a process.
func bedTarget(ctx context.Context, o options) (*target, func(), error) {
	bins, err := binaries(o.binDir)
	if err != nil {
		return nil, nil, err
	}
	done := step("Starting a one-machine cluster: kube-apiserver, kube-scheduler, 4 nodes (amd64, arm64, ppc64le, s390x), a registry, build-controller")
	bedLog := &strings.Builder{}
	env, err := framework.Start(ctx, framework.Options{Binaries: bins, Bed: bed.Options{Log: bedLog}})
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		d := step("Stopping everything the demo started")
		env.Stop()
		d()
	}
	done()
	fmt.Printf("    The nodes are simulated (kwok); build pods bound to them run as processes here, foreign\n" +
		"    architectures under qemu. archway's CRDs (Build, BuildConfig) come from manifests/crd/bases.\n")
	t, err := bedRepo(env.Bed)
	if err != nil {
		return nil, stop, err
	}
	t.lookAround = func(b *buildv1.Build) {
		lookAround(env.Bed, b, "build-controller's log: "+env.ControllerLog)
	}
	return t, stop, nil
}

// installTarget starts a bed with no archway on it and installs archway
// with kubectl as docs/admin-guide/install.md says, every component a pod
// under its own service account.
func installTarget(ctx context.Context, o options) (*target, func(), error) {
	bins, err := binaries(o.binDir)
	if err != nil {
		return nil, nil, err
	}
	done := step("Starting a one-machine cluster: kube-apiserver, kube-scheduler, kube-controller-manager, 4 nodes, a registry")
	dir, err := os.MkdirTemp("", "archway-demo-")
	if err != nil {
		return nil, nil, err
	}
	ib, err := framework.StartInstallBed(ctx, bins, dir, bed.Options{Log: &strings.Builder{}})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	stop := func() {
		d := step("Stopping everything the demo started")
		_ = ib.Bed.Stop()
		_ = os.RemoveAll(dir)
		d()
	}
	done()
	fmt.Printf("    The nodes are simulated (kwok); pods bound to them run as processes here (archway's images\n" +
		"    mapped to bin/build-controller and bin/builder), foreign architectures under qemu.\n")
	overlay, err := ib.WriteOverlay(dir)
	if err != nil {
		return nil, stop, err
	}
	done = step("Installing archway: kubectl apply --server-side -k manifests/crd, then an overlay of manifests/default\n    (the bed's registry and git settings); waiting for every component's pods and webhooks")
	if err := ib.Install(ctx, overlay); err != nil {
		return nil, stop, err
	}
	done()
	out, err := ib.Kubectl(ctx, "get", "deployments", "-n", framework.InstallNamespace)
	if err != nil {
		return nil, stop, err
	}
	fmt.Print(indent(out))
	t, err := bedRepo(ib.Bed)
	if err != nil {
		return nil, stop, err
	}
	t.lookAround = func(b *buildv1.Build) {
		lookAround(ib.Bed, b, "archway's components: kubectl get pods -n "+framework.InstallNamespace+"; kubectl logs -n "+framework.InstallNamespace+" deploy/build-controller")
	}
	return t, stop, nil
}

// bedRepo makes the git repository of examples/demo/app in the bed's
// directory and returns the target building it on the bed.
func bedRepo(b *bed.Bed) (*target, error) {
	done := step("Making a git repository from examples/demo/app")
	files, err := readDir(filepath.Join(bed.RepoRoot(), "examples", "demo", "app"))
	if err != nil {
		return nil, err
	}
	uri, err := framework.GitRepo(filepath.Join(b.Dir, "demo-repo"), files)
	if err != nil {
		return nil, err
	}
	done()
	return &target{
		kubeconfig: b.Kubeconfig,
		namespace:  "default",
		gitURI:     uri,
		registry:   b.Registry.Host,
		baseImage:  b.BaseImage,
	}, nil
}

// clusterTarget is a cluster where archway is installed.
func clusterTarget(o options) (*target, error) {
	if o.gitURI == "" || o.registry == "" {
		return nil, fmt.Errorf("--cluster needs --git-uri (a repository holding examples/demo/app; --context-dir for a directory of it) and --registry (where build pods may push)")
	}
	if _, err := os.Stat(o.kubeconfig); err != nil {
		return nil, fmt.Errorf("--cluster: %w", err)
	}
	return &target{
		kubeconfig: o.kubeconfig,
		namespace:  o.namespace,
		gitURI:     o.gitURI,
		contextDir: o.contextDir,
		registry:   strings.TrimSuffix(o.registry, "/"),
		baseImage:  o.baseImage,
	}, nil
}

// demoBuild is the demo on any cluster where archway runs: it creates the
// BuildConfig of examples/demo/buildconfig.yaml (under a name of its own),
// starts its first build with the plugin's start-build, draws the
// progress table until the build ends and prints the index it pushed.
func demoBuild(ctx context.Context, t *target) (*buildv1.Build, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", t.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.kubeconfig, err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: bed.NewScheme()})
	if err != nil {
		return nil, err
	}
	done := step("Applying examples/demo/buildconfig.yaml")
	raw, err := os.ReadFile(filepath.Join(bed.RepoRoot(), "examples", "demo", "buildconfig.yaml"))
	if err != nil {
		return nil, err
	}
	text := os.Expand(string(raw), func(name string) string {
		switch name {
		case "GIT_URI":
			return t.gitURI
		case "REGISTRY":
			return t.registry
		case "BASE_IMAGE":
			return t.baseImage
		}
		return "${" + name + "}"
	})
	bc := &buildv1.BuildConfig{}
	if err := yaml.UnmarshalStrict([]byte(text), bc); err != nil {
		return nil, fmt.Errorf("examples/demo/buildconfig.yaml: %w", err)
	}
	bc.Namespace = t.namespace
	bc.Spec.Source.ContextDir = t.contextDir
	// A name of its own, so that the demo runs again on the same cluster.
	bc.GenerateName = bc.Name + "-"
	bc.Name = ""
	if err := c.Create(ctx, bc); err != nil {
		return nil, err
	}
	done()

	// The build is started as a user does: kubectl archway start-build
	// (the plugin's command, run in this process).
	name := instantiate.Name(bc.Name, 1)
	bd := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: bc.Namespace, Name: name}}
	// The watches end before the bed stops: an open watch makes the
	// apiserver's shutdown wait.
	watchCtx, endWatch := context.WithCancel(ctx)
	defer endWatch()
	tl, err := framework.WatchBuild(watchCtx, c, bc.Namespace, name)
	if err != nil {
		return nil, err
	}
	fmt.Printf("==> kubectl archway start-build %s -n %s   (build %s for %s)\n", bc.Name, bc.Namespace, name, strings.Join(bc.Spec.Platforms, ", "))
	tl.Created = time.Now()
	var started bytes.Buffer
	plugin := plugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &started, ErrOut: os.Stderr})
	plugin.SetArgs([]string{"start-build", bc.Name, "-n", bc.Namespace, "--kubeconfig", t.kubeconfig})
	if err := plugin.ExecuteContext(ctx); err != nil {
		return nil, fmt.Errorf("kubectl archway start-build: %w", err)
	}
	fmt.Printf("    %s\n", strings.TrimSpace(started.String()))
	table := newTable(os.Stdout, bd.Name, bc.Spec.Platforms)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for finished := false; !finished; {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tl.Done():
			finished = true
		case <-tick.C:
		}
		table.draw(tl)
	}
	final := &buildv1.Build{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(bd), final); err != nil {
		return nil, err
	}
	table.draw(tl)
	endWatch()
	summary(final, tl)
	if final.Status.Phase != buildv1.BuildPhaseComplete {
		return final, fmt.Errorf("build %s ended %s: %s", final.Name, final.Status.Phase, final.Status.Message)
	}
	return final, nil
}

// indent indents every line of s by four spaces.
func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "    " + strings.Join(lines, "\n    ") + "\n"
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
		row(p, buildv1.PlatformPodName(t.build, p), string(ent[p].Phase))
	}
	row("(image index)", buildv1.ManifestListPodName(t.build), "")
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
		if pt, ok := tl.Pod(buildv1.PlatformPodName(b.Name, e.Platform)); ok && !pt.Finished.IsZero() {
			took = fmt.Sprintf("%.1fs", pt.Finished.Sub(pt.Running).Seconds())
		}
		fmt.Printf("    %-15s %-73s %s\n", e.Platform, dig, took)
	}
	fmt.Printf("\nThe whole build took %.1fs, from creating the Build to Complete (platforms build in parallel).\n", end.Sub(tl.Created).Seconds())
	if o, err := tl.Overhead(b.Name, b.Spec.Platforms); err == nil {
		fmt.Printf("archway's own share (scheduling, pod start-up, the index): %.1fs.\n", o.Total().Seconds())
	}
}

// lookAround prints how to inspect the kept bed; more says where
// archway's own logs are.
func lookAround(b *bed.Bed, bd *buildv1.Build, more string) {
	kubectl, err := bed.Tool("kubectl")
	if err != nil {
		kubectl = "kubectl"
	}
	sel := buildv1.PodSelector(bd.Name)
	fmt.Printf(`
The bed stays up until you press Ctrl-C. In another terminal:

    export KUBECONFIG=%s
    alias kubectl=%s
    kubectl get builds,buildconfigs
    kubectl get pods -l %s -o wide
    kubectl logs -l %s --prefix
    kubectl describe build %s
    curl -s http://%s/v2/demo/hello/tags/list

%s
`, b.Kubeconfig, kubectl, sel, sel, bd.Name, b.Registry.Host, more)
}
