package build

import (
	"bufio"
	"context"
	"errors"
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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	configv1alpha1 "github.com/archway-build/archway/pkg/apis/config/v1alpha1"
	buildcontroller "github.com/archway-build/archway/pkg/build/controller"

	"github.com/archway-build/archway/test/bed"
)

// BenchmarkFanOut creates four-platform Builds at once against the real
// build-controller binary, 10 and then 100 of them, and prints how long each
// took from its creation (the create call's answer) to its platforms in its
// status, to all its pods created, and to all of them bound by the
// scheduler (p50, p99); the controller process's CPU seconds and peak RSS;
// the apiserver requests every client made; and the CPU seconds of every
// process of the bed, which tell who the time went to.
//
//	go test -tags "containers_image_openpgp exclude_graphdriver_btrfs netgo osusergo libsqlite3" \
//	  -run '^$' -bench FanOut -benchtime 1x ./test/integration/build/
//
// ARCHWAY_BENCH_APISERVER_PROFILE=<dir> also writes a 4-second CPU profile
// of the apiserver during the 100-Build round to <dir>/apiserver.pprof.
func BenchmarkFanOut(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := b.TempDir()
	bin, err := bed.GoBuild(ctx, dir, "./cmd/build-controller")
	if err != nil {
		b.Fatal(err)
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
	stopController := sync.OnceFunc(func() {
		_ = proc.Process.Signal(syscall.SIGTERM)
		_ = proc.Wait()
	})
	defer stopController()

	// Warm up: one build through to its pods, so caches are synced.
	warm := &harness{t: &testing.T{}, ctx: ctx}
	if warm.ns, err = testBed.CreateNamespace(ctx, "bench-warm"); err != nil {
		b.Fatal(err)
	}
	if err := k8s.Create(ctx, warm.buildObj("warm", fourPlatforms...)); err != nil {
		b.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := testBed.Clientset.CoreV1().Pods(warm.ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 4, nil
	})
	if err != nil {
		b.Fatalf("the controller did not create the warm-up build's pods; log:\n%s", readFile(logFile.Name()))
	}
	b.ResetTimer()
	for _, builds := range []int{10, 100} {
		fanOutRound(ctx, b, builds, proc.Process.Pid, logFile.Name())
	}
	rss := float64(peakRSS(b, proc.Process.Pid)) / (1 << 20)
	fmt.Printf("fan-out controller: peak RSS %.1f MiB\n", rss)
	b.ReportMetric(rss, "controller-peak-rss-MiB")

	// The floor: the same writes with no controller, made by this process
	// as fast as the apiserver takes them.
	stopController()
	fanOutFloor(ctx, b, 100)
}

// fanOutFloor makes, for builds four-platform Builds at once, the writes
// the controller's fan-out makes (the platforms into the status, then the
// four pods and the annotations together, then the Pending status) straight
// from this process, every Build in a goroutine of its own, and prints the
// time from each Build's creation to its last pod created. It is the least
// the apiserver, sharing the machine with the rest of the bed, lets any
// controller take for that work.
func fanOutFloor(ctx context.Context, b *testing.B, builds int) {
	ns, err := testBed.CreateNamespace(ctx, fmt.Sprintf("bench-floor-%d", builds))
	if err != nil {
		b.Fatal(err)
	}
	h := &harness{t: &testing.T{}, ctx: ctx, ns: ns}
	defer suite.DeleteNamespace(ns)
	cfg := &configv1alpha1.BuildControllerConfiguration{Build: configv1alpha1.BuildControllerConfig{BuilderImage: builderImage}}
	configv1alpha1.SetDefaults(cfg)
	pl := buildcontroller.PodPlan{Config: &cfg.Build, Platforms: fourPlatforms}
	applyStatus := func(bl *buildv1.Build, plan buildcontroller.Plan) error {
		next := buildcontroller.NextStatus(bl, fourPlatforms, plan, metav1.Now())
		body, err := buildcontroller.StatusApply(bl, next, plan)
		if err != nil {
			return err
		}
		if err := k8s.Status().Apply(ctx, body, client.FieldOwner(buildcontroller.FieldManager), client.ForceOwnership); err != nil {
			return err
		}
		bl.Status = next
		return nil
	}
	one := func(name string) (time.Duration, error) {
		bl := h.buildObj(name, fourPlatforms...)
		if err := k8s.Create(ctx, bl); err != nil {
			return 0, err
		}
		createdAt := time.Now()
		if err := applyStatus(bl, buildcontroller.ResolutionPlan(bl, buildcontroller.Resolution{Platforms: fourPlatforms}, metav1.Now())); err != nil {
			return 0, fmt.Errorf("status: %w", err)
		}
		var wg sync.WaitGroup
		errs := make([]error, len(fourPlatforms)+1)
		pods := map[string]*corev1.Pod{}
		var podsMu sync.Mutex
		for i, p := range fourPlatforms {
			wg.Go(func() {
				pod, err := pl.BuildPod(bl, p)
				if err == nil {
					err = k8s.Create(ctx, pod, client.FieldOwner(buildcontroller.FieldManager))
				}
				podsMu.Lock()
				pods[pod.Name] = pod
				podsMu.Unlock()
				errs[i] = err
			})
		}
		annotated := bl.DeepCopy()
		wg.Go(func() {
			patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+buildv1.PodSelectorAnnotation+`":"`+buildv1.PodSelector(name)+
				`","`+buildv1.BuildPodNameAnnotation+`":"`+buildv1.ManifestListPodName(name)+`"}}}`))
			errs[len(fourPlatforms)] = k8s.Patch(ctx, annotated, patch, client.FieldOwner(buildcontroller.FieldManager))
		})
		wg.Wait()
		podsAt := time.Now()
		if err := errors.Join(errs...); err != nil {
			return 0, err
		}
		bl.ResourceVersion = annotated.ResourceVersion
		plan := buildcontroller.Decide(buildcontroller.PlanInput{Build: bl, Platforms: fourPlatforms, ManifestList: true, Pods: pods, Now: metav1.Now()})
		if err := applyStatus(bl, plan); err != nil {
			return 0, fmt.Errorf("pending status: %w", err)
		}
		return podsAt.Sub(createdAt), nil
	}
	var mu sync.Mutex
	var toCreated []time.Duration
	var wg sync.WaitGroup
	for i := range builds {
		wg.Go(func() {
			d, err := one(fmt.Sprintf("floor-%03d", i))
			if err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			toCreated = append(toCreated, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	slices.Sort(toCreated)
	p50, p99 := toCreated[len(toCreated)*50/100], toCreated[min(len(toCreated)-1, len(toCreated)*99/100)]
	fmt.Printf("fan-out %3d  floor, no controller: creation to all pods created p50 %7.1f ms   p99 %7.1f ms   max %7.1f ms\n",
		builds, ms(p50), ms(p99), ms(toCreated[len(toCreated)-1]))
	b.ReportMetric(ms(p50), fmt.Sprintf("ms-p50-%d-floor-creation-to-all-pods-created", builds))
	b.ReportMetric(ms(p99), fmt.Sprintf("ms-p99-%d-floor-creation-to-all-pods-created", builds))
}

// fanOutRound creates builds four-platform Builds at once in a namespace of
// their own and prints the round's figures.
func fanOutRound(ctx context.Context, b *testing.B, builds, controllerPID int, controllerLog string) {
	// The informers stop with this round (their Shutdown waits for that).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ns, err := testBed.CreateNamespace(ctx, fmt.Sprintf("bench-%d", builds))
	if err != nil {
		b.Fatal(err)
	}
	h := &harness{t: &testing.T{}, ctx: ctx, ns: ns}
	defer suite.DeleteNamespace(ns)

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
	// Informers, not bare watches: they list again if a watch ends.
	factory := informers.NewSharedInformerFactoryWithOptions(testBed.Clientset, 0, informers.WithNamespace(ns))
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	// And the Builds: when each was first seen with its platforms in its
	// status, the step before its pods.
	resolved := map[string]time.Time{}
	dyn, err := dynamic.NewForConfig(testBed.Config)
	if err != nil {
		b.Fatal(err)
	}
	buildFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
	noteResolved := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		if entries, _, _ := unstructured.NestedSlice(u.Object, "status", "platforms"); len(entries) == 0 {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if _, seen := resolved[u.GetName()]; !seen {
			resolved[u.GetName()] = now
		}
	}
	if _, err := buildFactory.ForResource(buildv1.GroupVersion.WithResource("builds")).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    noteResolved,
		UpdateFunc: func(_, obj any) { noteResolved(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	buildFactory.Start(ctx.Done())
	defer func() { cancel(); buildFactory.Shutdown() }()
	factory.WaitForCacheSync(ctx.Done())
	buildFactory.WaitForCacheSync(ctx.Done())

	cpuBefore := cpuSeconds(b, controllerPID)
	requestsBefore, err := testBed.APIRequests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	processesBefore, err := bed.ProcessCPU()
	if err != nil {
		b.Fatal(err)
	}
	profileDone := make(chan struct{})
	if dir := os.Getenv("ARCHWAY_BENCH_APISERVER_PROFILE"); dir != "" && builds == 100 {
		go func() {
			defer close(profileDone)
			raw, err := testBed.Clientset.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "4").DoRaw(ctx)
			if err != nil {
				b.Errorf("profiling the apiserver: %v", err)
				return
			}
			_ = os.WriteFile(filepath.Join(dir, "apiserver.pprof"), raw, 0o600)
		}()
	} else {
		close(profileDone)
	}

	start := map[string]time.Time{}
	var createCalls []time.Duration
	var wg sync.WaitGroup
	var startMu sync.Mutex
	for i := range builds {
		name := fmt.Sprintf("app-%03d", i)
		obj := h.buildObj(name, fourPlatforms...)
		wg.Go(func() {
			t0 := time.Now()
			if err := k8s.Create(ctx, obj); err != nil {
				b.Error(err)
			}
			// The Build exists once the apiserver answered: its times
			// count from there, the create call itself apart.
			createdAt := time.Now()
			startMu.Lock()
			start[name] = createdAt
			createCalls = append(createCalls, createdAt.Sub(t0))
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
		for _, bl := range list.Items {
			phases[string(bl.Status.Phase)+"/"+string(bl.Status.Reason)+"/"+bl.Status.PlatformsSummary]++
		}
		b.Fatalf("not every pod was bound in 2 minutes: %d pods created, %d bound; builds by phase %v; controller log:\n%s",
			nCreated, nBound, phases, tailOf(readFile(controllerLog), 40))
	}
	<-profileDone
	cpu := cpuSeconds(b, controllerPID) - cpuBefore
	requestsAfter, err := testBed.APIRequests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	requests := requestsAfter.Sub(requestsBefore)
	processes, err := bed.ProcessCPU()
	if err != nil {
		b.Fatal(err)
	}
	processes = processes.Sub(processesBefore)

	mu.Lock()
	defer mu.Unlock()
	var toResolved, toCreated, toBound []time.Duration
	for name, t0 := range start {
		var lastCreated, lastBound time.Time
		for _, p := range fourPlatforms {
			pod := name + "-linux-" + strings.Split(p, "/")[1] + "-build"
			lastCreated = later(lastCreated, created[pod])
			lastBound = later(lastBound, bound[pod])
		}
		toResolved = append(toResolved, resolved[name].Sub(t0))
		toCreated = append(toCreated, lastCreated.Sub(t0))
		toBound = append(toBound, lastBound.Sub(t0))
	}
	report := func(what string, ds []time.Duration) {
		slices.Sort(ds)
		p50, p99 := ds[len(ds)*50/100], ds[min(len(ds)-1, len(ds)*99/100)]
		fmt.Printf("fan-out %3d  %-32s p50 %7.1f ms   p99 %7.1f ms   max %7.1f ms\n", builds, what, ms(p50), ms(p99), ms(ds[len(ds)-1]))
		metric := fmt.Sprintf("%d-%s", builds, strings.ReplaceAll(what, " ", "-"))
		b.ReportMetric(ms(p50), "ms-p50-"+metric)
		b.ReportMetric(ms(p99), "ms-p99-"+metric)
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("fan-out %3d: %d Builds x %d platforms created at once (%d pods); load average %s", builds, builds, len(fourPlatforms), 4*builds, load)
	report("Build create call (apiserver)", createCalls)
	report("creation to platforms in status", toResolved)
	report("creation to all pods created", toCreated)
	report("creation to all pods bound", toBound)
	fmt.Printf("fan-out %3d  controller: %.2f CPU seconds\n", builds, cpu)
	fmt.Printf("fan-out %3d  apiserver requests from the first create to the last pod bound (all clients; %.0f writes, %.1f per Build):\n%s",
		builds, requests.Writes(), requests.Writes()/float64(builds), requests)
	fmt.Printf("fan-out %3d  CPU seconds by process over the same stretch:\n%s", builds, processes)
	b.ReportMetric(cpu, fmt.Sprintf("%d-controller-cpu-s", builds))
	b.ReportMetric(requests.Writes()/float64(builds), fmt.Sprintf("%d-apiserver-writes/build", builds))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// cpuSeconds is the user+system CPU time of a process.
func cpuSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	cpu, err := bed.CPUSeconds(pid)
	if err != nil {
		b.Fatal(err)
	}
	return cpu
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
