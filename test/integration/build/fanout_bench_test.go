package build

import (
	"bufio"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"

	"github.com/archway-build/archway/test/bed"
)

// BenchmarkFanOut creates 100 four-platform Builds at once against the real
// build-controller binary and prints how long each took from its creation
// to all its pods created and to all of them bound by the scheduler (p50,
// p99), and the controller process's CPU seconds and peak RSS.
//
//	go test -tags "containers_image_openpgp exclude_graphdriver_btrfs libsqlite3" \
//	  -run '^$' -bench FanOut -benchtime 1x ./test/integration/build/
func BenchmarkFanOut(b *testing.B) {
	const builds = 100
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := b.TempDir()
	bin := filepath.Join(dir, "build-controller")
	goBuild := exec.CommandContext(ctx, "go", "build", "-tags", "containers_image_openpgp exclude_graphdriver_btrfs libsqlite3", "-o", bin, "./cmd/build-controller")
	goBuild.Dir = bed.RepoRoot()
	if out, err := goBuild.CombinedOutput(); err != nil {
		b.Fatalf("building build-controller: %v\n%s", err, out)
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte("apiVersion: config.archway.dev/v1alpha1\nkind: BuildControllerConfiguration\nbuild:\n  builderImage: "+builderImage+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "build-controller.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	proc := exec.Command(bin, "--config="+config, "--kubeconfig="+testBed.Kubeconfig, "--leader-elect=false",
		"--controllers=build", "--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level=info")
	proc.Stdout, proc.Stderr = logFile, logFile
	proc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := proc.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = proc.Process.Signal(syscall.SIGTERM)
		_ = proc.Wait()
	}()

	// Warm up: one build through to its pods, so caches are synced.
	warm := &harness{t: &testing.T{}, ctx: ctx}
	if warm.ns, err = testBed.CreateNamespace(ctx, "bench-warm"); err != nil {
		b.Fatal(err)
	}
	warmBuild := warm.buildObj("warm", fourPlatforms...)
	if err := k8s.Create(ctx, warmBuild); err != nil {
		b.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := testBed.Clientset.CoreV1().Pods(warm.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 4, nil
	})
	if err != nil {
		b.Fatalf("the controller did not create the warm-up build's pods; log:\n%s", readFile(logFile.Name()))
	}

	ns, err := testBed.CreateNamespace(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	h := &harness{t: &testing.T{}, ctx: ctx, ns: ns}
	defer h.cleanup()

	// Watch the pods: when each was first seen, and first seen bound.
	var mu sync.Mutex
	created, bound := map[string]time.Time{}, map[string]time.Time{}
	allBound := make(chan struct{})
	record := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if _, seen := created[pod.Name]; !seen {
			created[pod.Name] = now
		}
		if _, seen := bound[pod.Name]; !seen && pod.Spec.NodeName != "" {
			bound[pod.Name] = now
			if len(bound) == 4*builds {
				close(allBound)
			}
		}
	}
	// An informer, not a bare watch: it lists again if the watch ends.
	factory := informers.NewSharedInformerFactoryWithOptions(testBed.Clientset, 0, informers.WithNamespace(ns))
	podInformer := factory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	factory.WaitForCacheSync(ctx.Done())

	cpuBefore := cpuSeconds(b, proc.Process.Pid)
	start := map[string]time.Time{}
	var createCalls []time.Duration
	var wg sync.WaitGroup
	var startMu sync.Mutex
	b.ResetTimer()
	for i := range builds {
		name := fmt.Sprintf("app-%03d", i)
		obj := h.buildObj(name, fourPlatforms...)
		wg.Go(func() {
			t0 := time.Now()
			if err := k8s.Create(ctx, obj); err != nil {
				b.Error(err)
			}
			startMu.Lock()
			start[name] = t0
			createCalls = append(createCalls, time.Since(t0))
			startMu.Unlock()
		})
	}
	wg.Wait()
	select {
	case <-allBound:
	case <-time.After(2 * time.Minute):
		mu.Lock()
		nCreated, nBound := len(created), len(bound)
		mu.Unlock()
		var list buildv1.BuildList
		_ = k8s.List(ctx, &list, client.InNamespace(ns))
		phases := map[string]int{}
		var pods corev1.PodList
		_ = k8s.List(ctx, &pods, client.InNamespace(ns))
		perBuild := map[string]int{}
		unbound := 0
		for _, p := range pods.Items {
			perBuild[p.Labels[buildv1.BuildLabel]]++
			if p.Spec.NodeName == "" {
				unbound++
			}
		}
		for _, bl := range list.Items {
			phases[string(bl.Status.Phase)+"/"+string(bl.Status.Reason)+"/"+bl.Status.PlatformsSummary]++
			if perBuild[bl.Name] != 4 {
				var es []string
				for _, e := range bl.Status.Platforms {
					es = append(es, e.Platform+"="+string(e.Phase))
				}
				b.Logf("build %s has %d pods; entries %v", bl.Name, perBuild[bl.Name], es)
			}
		}
		b.Logf("the apiserver has %d pods in the namespace, %d unbound", len(pods.Items), unbound)
		b.Fatalf("not every pod was bound in 2 minutes: %d pods created, %d bound; builds by phase %v; controller log:\n%s",
			nCreated, nBound, phases, tailOf(readFile(logFile.Name()), 40))
	}
	b.StopTimer()
	cpu := cpuSeconds(b, proc.Process.Pid) - cpuBefore
	rss := peakRSS(b, proc.Process.Pid)

	mu.Lock()
	defer mu.Unlock()
	var toCreated, toBound []time.Duration
	for name, t0 := range start {
		var lastCreated, lastBound time.Time
		for _, p := range fourPlatforms {
			pod := name + "-linux-" + strings.Split(p, "/")[1] + "-build"
			lastCreated = later(lastCreated, created[pod])
			lastBound = later(lastBound, bound[pod])
		}
		toCreated = append(toCreated, lastCreated.Sub(t0))
		toBound = append(toBound, lastBound.Sub(t0))
	}
	report := func(what string, ds []time.Duration) {
		slices.Sort(ds)
		p50, p99 := ds[len(ds)*50/100], ds[min(len(ds)-1, len(ds)*99/100)]
		fmt.Printf("fan-out %-32s p50 %7.1f ms   p99 %7.1f ms   max %7.1f ms\n", what, ms(p50), ms(p99), ms(ds[len(ds)-1]))
		b.ReportMetric(ms(p50), "ms-p50-"+strings.ReplaceAll(what, " ", "-"))
		b.ReportMetric(ms(p99), "ms-p99-"+strings.ReplaceAll(what, " ", "-"))
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("fan-out: %d Builds x %d platforms created at once (%d pods); load average %s", builds, len(fourPlatforms), 4*builds, load)
	report("Build create call (apiserver)", createCalls)
	report("creation to all pods created", toCreated)
	report("creation to all pods bound", toBound)
	fmt.Printf("fan-out controller: %.2f CPU seconds, peak RSS %.1f MiB\n", cpu, float64(rss)/(1<<20))
	b.ReportMetric(cpu, "controller-cpu-s")
	b.ReportMetric(float64(rss)/(1<<20), "controller-peak-rss-MiB")
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuSeconds is the user+system CPU time of a process (/proc/<pid>/stat;
// clock ticks of 1/100 s, as on every Linux we run on).
func cpuSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command (which may hold spaces) start after ")".
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100
}

// peakRSS is a process's peak resident set size in bytes (VmHWM).
func peakRSS(b *testing.B, pid int) int64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmHWM")
	return 0
}

func tailOf(s string, lines int) string {
	all := strings.Split(s, "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func readFile(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}
