package build

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/archway-build/archway/test/bed"
)

// BenchmarkScale prints the Build controller's cost as curves, so that a
// cost growing with the cluster instead of with the work shows as a bent
// curve: controller CPU (total and per Build) and peak RSS against the
// number of Ready nodes at a fixed number of four-platform Builds, then
// against the number of Builds at the largest node count, next to the
// apiserver's floor for the same writes. Every point runs a fresh
// build-controller process (peak RSS is the process's high-water mark) with
// the flags BenchmarkFanOut uses. It asserts nothing about time.
//
//	go test -tags "containers_image_openpgp exclude_graphdriver_btrfs netgo osusergo libsqlite3" \
//	  -run '^$' -bench Scale -benchtime 1x -timeout 60m ./test/integration/build/
//
// The sizes come from the environment (comma-separated; defaults keep one
// run within a few minutes on 2 cores):
//   - ARCHWAY_BENCH_NODES: node counts, ascending (default "4,400"; the
//     issue's curve is "4,400,2000"). Nodes are kwok nodes spread over the
//     four architectures and stay for the rest of the process.
//   - ARCHWAY_BENCH_BUILDS: Builds per node point (default "100").
//   - ARCHWAY_BENCH_BUILDS_CURVE: Build counts at the largest node count,
//     each with its floor (default "10,100"; "10,100,500" for the issue's).
func BenchmarkScale(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	nodeCounts := envInts(b, "ARCHWAY_BENCH_NODES", []int{4, 400})
	buildsPerPoint := envInts(b, "ARCHWAY_BENCH_BUILDS", []int{100})[0]
	buildsCurve := envInts(b, "ARCHWAY_BENCH_BUILDS_CURVE", []int{10, 100})
	dir := b.TempDir()
	bin, err := bed.GoBuild(ctx, dir, "./cmd/build-controller")
	if err != nil {
		b.Fatal(err)
	}
	var lines []string
	b.ResetTimer()
	for _, nodes := range nodeCounts {
		addArchNodes(ctx, b, nodes)
		p := scalePoint(ctx, b, bin, dir, nodes, buildsPerPoint)
		lines = append(lines, p.String())
	}
	largest := nodeCounts[len(nodeCounts)-1]
	for _, builds := range buildsCurve {
		p := scalePoint(ctx, b, bin, dir, largest, builds)
		lines = append(lines, p.String())
		fanOutFloor(ctx, b, builds)
	}
	fmt.Printf("scale: controller cost by nodes and Builds (four platforms per Build):\n%s\n", strings.Join(lines, "\n"))
}

// scaleFigures are one point of the curves.
type scaleFigures struct {
	nodes, builds int
	cpu           float64 // controller CPU seconds from the first create to the last pod
	rssMiB        float64 // controller peak RSS over its life
	p50, p99      time.Duration
	load          string
}

func (p scaleFigures) String() string {
	return fmt.Sprintf("  nodes %5d  Builds %4d  controller CPU %6.2f s (%5.2f ms/Build)  peak RSS %6.1f MiB  creation to all pods created p50 %6.0f ms p99 %6.0f ms  load %s",
		p.nodes, p.builds, p.cpu, 1000*p.cpu/float64(p.builds), p.rssMiB, ms(p.p50), ms(p.p99), p.load)
}

// scalePoint starts a build-controller process, warms it up with one
// Build, creates builds four-platform Builds at once and measures until all
// their pods exist.
func scalePoint(ctx context.Context, b *testing.B, bin, dir string, nodes, builds int) scaleFigures {
	b.Helper()
	pid, stop, logPath := startBenchController(ctx, b, bin, dir, fmt.Sprintf("n%d-b%d", nodes, builds))
	defer stop()
	ns, err := testBed.CreateNamespace(ctx, fmt.Sprintf("scale-%d-%d", nodes, builds))
	if err != nil {
		b.Fatal(err)
	}
	h := &harness{t: &testing.T{}, ctx: ctx, ns: ns}
	defer suite.DeleteNamespace(ns)

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	created := map[string]time.Time{}
	want := 4 * (builds + 1)
	all := make(chan struct{})
	factory := informers.NewSharedInformerFactoryWithOptions(testBed.Clientset, 0, informers.WithNamespace(ns))
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if _, seen := created[pod.Name]; !seen {
			created[pod.Name] = time.Now()
			if len(created) == want {
				close(all)
			}
		}
	}}); err != nil {
		b.Fatal(err)
	}
	factory.Start(rctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	factory.WaitForCacheSync(rctx.Done())

	// Warm up: one Build through to its pods, so the caches have synced.
	if err := k8s.Create(ctx, h.buildObj("warm", fourPlatforms...)); err != nil {
		b.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(created) == 4, nil
	})
	if err != nil {
		b.Fatalf("the controller did not create the warm-up Build's pods; log:\n%s", tailOf(readFile(logPath), 40))
	}

	cpuBefore := cpuSeconds(b, pid)
	start := map[string]time.Time{}
	var startMu sync.Mutex
	var wg sync.WaitGroup
	for i := range builds {
		name := fmt.Sprintf("app-%04d", i)
		obj := h.buildObj(name, fourPlatforms...)
		wg.Go(func() {
			if err := k8s.Create(ctx, obj); err != nil {
				b.Error(err)
			}
			startMu.Lock()
			start[name] = time.Now()
			startMu.Unlock()
		})
	}
	wg.Wait()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		mu.Lock()
		n := len(created)
		mu.Unlock()
		b.Fatalf("%d nodes, %d Builds: only %d of %d pods created in 5 minutes; log:\n%s", nodes, builds, n, want, tailOf(readFile(logPath), 40))
	}
	cpu := cpuSeconds(b, pid) - cpuBefore
	rss := float64(peakRSS(b, pid)) / (1 << 20)
	load, _ := os.ReadFile("/proc/loadavg")

	mu.Lock()
	defer mu.Unlock()
	var toCreated []time.Duration
	for name, t0 := range start {
		var last time.Time
		for _, p := range fourPlatforms {
			last = later(last, created[name+"-linux-"+strings.Split(p, "/")[1]+"-build"])
		}
		toCreated = append(toCreated, last.Sub(t0))
	}
	slices.Sort(toCreated)
	fig := scaleFigures{
		nodes: nodes, builds: builds, cpu: cpu, rssMiB: rss,
		p50: toCreated[len(toCreated)*50/100], p99: toCreated[min(len(toCreated)-1, len(toCreated)*99/100)],
		load: strings.Join(strings.Fields(string(load))[:3], " "),
	}
	fmt.Println("scale:" + fig.String())
	b.ReportMetric(cpu, fmt.Sprintf("n%d-b%d-controller-cpu-s", nodes, builds))
	b.ReportMetric(rss, fmt.Sprintf("n%d-b%d-controller-peak-rss-MiB", nodes, builds))
	return fig
}

// startBenchController runs build-controller as BenchmarkFanOut does and
// returns its pid, a function that stops it (SIGTERM, then waits) and the
// path of its log.
func startBenchController(ctx context.Context, b *testing.B, bin, dir, name string) (int, func(), string) {
	b.Helper()
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: config.archway.dev/v1alpha1\nkind: BuildControllerConfiguration\nbuild:\n  builderImage: "+builderImage+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	logPath := filepath.Join(dir, "build-controller-"+name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	proc := exec.CommandContext(ctx, bin, "--config="+config, "--kubeconfig="+testBed.Kubeconfig, "--leader-elect=false",
		"--controllers=build", "--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level=info")
	proc.Stdout, proc.Stderr = logFile, logFile
	proc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := proc.Start(); err != nil {
		b.Fatal(err)
	}
	stop := sync.OnceFunc(func() {
		_ = proc.Process.Signal(syscall.SIGTERM)
		_ = proc.Wait()
		_ = logFile.Close()
	})
	return proc.Process.Pid, stop, logPath
}

// addArchNodes brings the bed's Ready linux nodes (of the four
// architectures, control plane apart) up to total.
func addArchNodes(ctx context.Context, b *testing.B, total int) {
	b.Helper()
	perArch := max(total/4, 1)
	nodes := bed.ArchNodes(perArch, bed.DefaultArchitectures...)
	var missing []bed.Node
	existing, err := testBed.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range existing.Items {
		have[n.Name] = true
	}
	for _, n := range nodes {
		if !have[n.Name] {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return
	}
	start := time.Now()
	if err := testBed.AddNodes(ctx, missing...); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("scale: %d nodes Ready (%d added in %v)\n", len(nodes), len(missing), time.Since(start).Round(time.Second))
}

// envInts reads a comma-separated list of positive integers from the
// environment variable name, or returns def.
func envInts(b *testing.B, name string, def []int) []int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("%s=%q: want comma-separated positive integers", name, v)
		}
		out = append(out, n)
	}
	return out
}
