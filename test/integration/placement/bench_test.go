package placement

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/image"
	"github.com/archway-build/archway/test/bed"
)

// Benchmarks print figures; run them alone, once each:
//
//	go test -tags "$BUILD_TAGS" -run '^$' -bench . -benchtime 1x ./test/integration/placement/
//
// (BenchmarkWebhookTLS and BenchmarkPodCreateThroughWebhook send at least
// 5,000 and 1,000 requests, more with a larger -benchtime.)

// percentiles returns the p50 and p99 of ds in milliseconds.
func percentiles(ds []time.Duration) (p50, p99 float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q * float64(len(s)-1))
		return float64(s[i].Microseconds()) / 1000
	}
	return at(0.50), at(0.99)
}

// benchConfig turns placement on for a benchmark without a testing.T.
func benchConfig(b *testing.B) {
	b.Helper()
	if err := applyConfig(context.Background(), multiarchv1beta1.ClusterPodPlacementConfigSpec{}); err != nil {
		b.Fatal(err)
	}
}

func benchNamespace(b *testing.B, prefix string) string {
	b.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { deletePods(context.Background(), ns.Name) })
	return ns.Name
}

// BenchmarkWebhookTLS sends AdmissionReviews for new pods straight to the
// gate webhook over TLS on loopback from 100 concurrent clients, as the
// apiserver would, and reports the latency of each request.
func BenchmarkWebhookTLS(b *testing.B) {
	benchConfig(b)
	ns := benchNamespace(b, "bench-webhook")
	pod := makePod(ns, "").image(imgAll, imgARM64S390X).obj()
	pod.GenerateName = "bench-"
	raw, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	const clients = 100
	client := tlsClient(webhookCA, clients)
	body := func(i int) []byte {
		review := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID:       types.UID(fmt.Sprintf("bench-%d", i)),
				Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
				Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
				Namespace: ns, Operation: admissionv1.Create,
				Object: runtime.RawExtension{Raw: raw},
				DryRun: ptr.To(true), // nothing will be created: expect no event
			},
		}
		data, _ := json.Marshal(review)
		return data
	}
	n := max(b.N, 5000)
	// One client first: the latency of the webhook itself, TLS included.
	serial := make([]time.Duration, 1000)
	one := tlsClient(webhookCA, 1)
	for i := range serial {
		start := time.Now()
		resp, err := one.Post(webhookURL, "application/json", bytes.NewReader(body(i)))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		serial[i] = time.Since(start)
	}
	serialP50, serialP99 := percentiles(serial)

	// Then 100 clients at once, the benchmark client sharing the
	// machine's cores with the webhook.
	latencies := make([]time.Duration, n)
	var next atomic.Int64
	var patched atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				data := body(i)
				start := time.Now()
				resp, err := client.Post(webhookURL, "application/json", bytes.NewReader(data))
				if err != nil {
					b.Error(err)
					return
				}
				var review admissionv1.AdmissionReview
				err = json.NewDecoder(resp.Body).Decode(&review)
				_ = resp.Body.Close()
				latencies[i] = time.Since(start)
				if err != nil || review.Response == nil || !review.Response.Allowed {
					b.Errorf("bad answer: %v %+v", err, review.Response)
					return
				}
				if strings.Contains(string(review.Response.Patch), `"/spec/schedulingGates"`) {
					patched.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if int(patched.Load()) != n {
		b.Errorf("%d of %d answers gated the pod", patched.Load(), n)
	}

	// Then bursts: 100 creates sent at the same moment, as a Deployment
	// scaled up by 100 makes the apiserver send them, the next burst only
	// once every answer of the last one is in.
	const bursts = 50
	burstLatencies := make([]time.Duration, 0, bursts*clients)
	var burstMu sync.Mutex
	for burst := range bursts {
		var wg sync.WaitGroup
		release := make(chan struct{})
		for c := range clients {
			data := body(n + burst*clients + c)
			wg.Go(func() {
				<-release
				start := time.Now()
				resp, err := client.Post(webhookURL, "application/json", bytes.NewReader(data))
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				d := time.Since(start)
				burstMu.Lock()
				burstLatencies = append(burstLatencies, d)
				burstMu.Unlock()
			})
		}
		close(release)
		wg.Wait()
	}
	b.StopTimer()
	b.ReportMetric(serialP50, "serial-p50-ms")
	b.ReportMetric(serialP99, "serial-p99-ms")
	p50, p99 := percentiles(latencies)
	b.ReportMetric(p50, "concurrent100-p50-ms")
	b.ReportMetric(p99, "concurrent100-p99-ms")
	burstP50, burstP99 := percentiles(burstLatencies)
	b.ReportMetric(burstP50, "burst100-p50-ms")
	b.ReportMetric(burstP99, "burst100-p99-ms")
	fmt.Printf("webhook over TLS: one client p50 %.2f ms p99 %.2f ms; 100 clients without pause p50 %.2f ms p99 %.2f ms; bursts of 100 at once p50 %.2f ms p99 %.2f ms\n",
		serialP50, serialP99, p50, p99, burstP50, burstP99)
}

// BenchmarkPodCreateThroughWebhook creates pods through the apiserver from
// 100 clients at once, the webhook gating each, and reports the latency of
// the create calls (apiserver, webhook and etcd).
func BenchmarkPodCreateThroughWebhook(b *testing.B) {
	benchConfig(b)
	ns := benchNamespace(b, "bench-create")
	const clients = 100
	n := max(b.N, 1000)
	latencies := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				pod := makePod(ns, fmt.Sprintf("create-%05d", i)).image(imgAll).nodeSelector(unschedulableKey, "true").obj()
				start := time.Now()
				err := k8s.Create(context.Background(), pod)
				latencies[i] = time.Since(start)
				if err != nil {
					b.Error(err)
					return
				}
				if !gated(pod) {
					b.Errorf("pod %s was not gated", pod.Name)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	p50, p99 := percentiles(latencies)
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
	b.ReportMetric(float64(n), "pods")
}

// benchImages pushes 20 distinct images: 10 tagged v1, 10 tagged latest
// (which pods pull with policy Always), through host when set.
func benchImages(b *testing.B, host string) (refs []string, always map[string]bool) {
	b.Helper()
	p := newPusher(testBed.Registry)
	sets := [][]string{{"amd64", "arm64"}, {"arm64", "s390x"}, {"amd64", "arm64", "ppc64le", "s390x"}, {"ppc64le"}, {"amd64", "s390x"}}
	always = map[string]bool{}
	for i := range 20 {
		tag := "v1"
		if i%2 == 1 {
			tag = "latest"
		}
		ref, err := p.pushIndex(context.Background(), fmt.Sprintf("bench/img-%02d", i), tag, linux(sets[i%len(sets)]...)...)
		if err != nil {
			b.Fatal(err)
		}
		if host != "" {
			ref = strings.Replace(ref, testBed.Registry.Host, host, 1)
		}
		refs = append(refs, ref)
		always[ref] = tag == "latest"
	}
	return refs, always
}

// releaseWatcher notes when each pod of a namespace is first seen released.
type releaseWatcher struct {
	mu       sync.Mutex
	released map[string]time.Time
	// waiting are the names a wait still waits for; done is closed when
	// the last of them is released. A wait costs nothing per poll: the
	// watcher's cost must not grow with the backlog it measures.
	waiting map[string]bool
	done    chan struct{}
	stop    func()
}

func watchReleases(b testing.TB, ns string) *releaseWatcher {
	b.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(testBed.Clientset, 0, informers.WithNamespace(ns))
	rw := &releaseWatcher{released: map[string]time.Time{}}
	note := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Labels[placement.SchedulingGateLabel] != placement.SchedulingGateLabelRemoved {
			return
		}
		now := time.Now()
		rw.mu.Lock()
		if _, seen := rw.released[pod.Name]; !seen {
			rw.released[pod.Name] = now
			if rw.waiting[pod.Name] {
				delete(rw.waiting, pod.Name)
				if len(rw.waiting) == 0 {
					close(rw.done)
				}
			}
		}
		rw.mu.Unlock()
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    note,
		UpdateFunc: func(_, obj any) { note(obj) },
	}); err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	rw.stop = sync.OnceFunc(func() { close(stop); factory.Shutdown() })
	b.Cleanup(rw.stop)
	return rw
}

func (rw *releaseWatcher) wait(b testing.TB, names []string, timeout time.Duration) {
	b.Helper()
	rw.mu.Lock()
	want := map[string]bool{}
	for _, n := range names {
		if _, ok := rw.released[n]; !ok {
			want[n] = true
		}
	}
	if len(want) == 0 {
		rw.mu.Unlock()
		return
	}
	done := make(chan struct{})
	rw.waiting, rw.done = want, done
	rw.mu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
		return
	case <-timer.C:
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	missing := slices.Sorted(maps.Keys(rw.waiting))
	rw.waiting = nil
	if len(missing) > 0 {
		b.Fatalf("%d pods not released within %v, e.g. %s", len(missing), timeout, missing[0])
	}
}

// BenchmarkGateToUngate measures the pod placement controller on a warm
// cache with 20 distinct images, half of them :latest tags pulled with
// policy Always (re-resolved with a manifest HEAD for every pod): the
// latency from a pod's creation to its release at a steady 50 pods/s, then
// the sustained rate on a burst of 2,000 pods.
func BenchmarkGateToUngate(b *testing.B) {
	benchConfig(b)
	ns := benchNamespace(b, "bench-ungate")
	refs, always := benchImages(b, "")
	rw := watchReleases(b, ns)
	ctx := context.Background()
	// create creates pod i and reports whether the webhook gated it (under
	// load the apiserver may time out the webhook call and, with
	// failurePolicy Ignore, admit the pod ungated).
	var created sync.Map // name -> time the create returned
	var ungated atomic.Int64
	create := func(name string, i int) (bool, error) {
		w := makePod(ns, name).image(refs[i%len(refs)]).nodeSelector(unschedulableKey, "true")
		if always[refs[i%len(refs)]] {
			w.pullAlways()
		}
		pod := w.obj()
		if err := k8s.Create(ctx, pod); err != nil {
			return false, err
		}
		created.Store(name, time.Now())
		if !gated(pod) {
			ungated.Add(1)
			return false, nil
		}
		return true, nil
	}
	registryCalls := func() float64 {
		v, err := gatherCounter("archway_placement_registry_requests_total", nil)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}

	// Warm the cache: one pod per image.
	var warm []string
	for i := range refs {
		name := fmt.Sprintf("warm-%02d", i)
		if ok, err := create(name, i); err != nil {
			b.Fatal(err)
		} else if ok {
			warm = append(warm, name)
		}
	}
	rw.wait(b, warm, time.Minute)

	for range b.N {
		// Steady: 200 pods at 50 pods/s.
		var names []string
		tick := time.NewTicker(20 * time.Millisecond)
		callsBefore := registryCalls()
		for i := range 200 {
			<-tick.C
			name := fmt.Sprintf("steady-%04d", i)
			if ok, err := create(name, i); err != nil {
				b.Fatal(err)
			} else if ok {
				names = append(names, name)
			}
		}
		tick.Stop()
		rw.wait(b, names, time.Minute)
		p50, p99 := percentiles(latencies(rw, &created, names))
		b.ReportMetric(p50, "steady-p50-ms")
		b.ReportMetric(p99, "steady-p99-ms")
		b.ReportMetric((registryCalls()-callsBefore)/float64(len(names)), "steady-registry-calls/pod")

		// Burst: 2,000 pods from 50 creators; the controller works
		// through the backlog.
		const burst = 2000
		var mu sync.Mutex
		names = names[:0]
		requestsBefore, err := testBed.APIRequests(ctx)
		if err != nil {
			b.Fatal(err)
		}
		cpuBefore, err := bed.ProcessCPU()
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < burst; i = int(next.Add(1)) - 1 {
					name := fmt.Sprintf("burst-%04d", i)
					ok, err := create(name, i)
					if err != nil {
						b.Error(err)
						return
					}
					if ok {
						mu.Lock()
						names = append(names, name)
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
		createdAll := time.Since(start)
		rw.wait(b, names, 5*time.Minute)
		requestsAfter, err := testBed.APIRequests(ctx)
		if err != nil {
			b.Fatal(err)
		}
		cpuAfter, err := bed.ProcessCPU()
		if err != nil {
			b.Fatal(err)
		}
		requests := requestsAfter.Sub(requestsBefore)
		fmt.Printf("gate to ungate, burst of %d pods: apiserver requests from the first create to the last release (%.0f writes, %.1f per pod):\n%s",
			burst, requests.Writes(), requests.Writes()/burst, requests)
		fmt.Printf("gate to ungate, burst: CPU seconds by process (this test process runs the webhook, the controller and the 50 creators):\n%s",
			cpuAfter.Sub(cpuBefore))
		rw.mu.Lock()
		var last time.Time
		for _, n := range names {
			if t := rw.released[n]; t.After(last) {
				last = t
			}
		}
		rw.mu.Unlock()
		p50, p99 = percentiles(latencies(rw, &created, names))
		b.ReportMetric(float64(len(names))/last.Sub(start).Seconds(), "burst-pods/s")
		b.ReportMetric(float64(burst)/createdAll.Seconds(), "burst-creates/s")
		b.ReportMetric(p50, "burst-p50-ms")
		b.ReportMetric(p99, "burst-p99-ms")
	}

	// Backlog: 2,000 pods created with the gate while the controller is
	// down (the same 20 images, half :latest with policy Always), then one
	// replica started on them: its own rate, with no creates competing for
	// the apiserver.
	const backlog = 2000
	suiteController.stop()
	var names []string
	for i := range backlog {
		names = append(names, fmt.Sprintf("backlog-%04d", i))
	}
	err := createPods(ctx, backlog, 50, func(i int) *corev1.Pod {
		w := makePod(ns, names[i]).image(refs[i%len(refs)]).nodeSelector(unschedulableKey, "true").withGate()
		if always[refs[i%len(refs)]] {
			w.pullAlways()
		}
		return w.obj()
	})
	if err != nil {
		b.Fatal(err)
	}
	requestsBefore, err := testBed.APIRequests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if suiteController, err = startController(suiteOptions()); err != nil {
		b.Fatal(err)
	}
	rw.wait(b, names, 5*time.Minute)
	elapsed := time.Since(start)
	requestsAfter, err := testBed.APIRequests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	requests := requestsAfter.Sub(requestsBefore)
	fmt.Printf("gate to ungate, backlog: one replica started on %d gated pods released them in %v (%.0f pods/s, its start, leader election and cache sync included); apiserver requests meanwhile:\n%s",
		backlog, elapsed.Round(time.Millisecond), backlog/elapsed.Seconds(), requests)
	b.ReportMetric(backlog/elapsed.Seconds(), "backlog-pods/s")
	b.ReportMetric(float64(ungated.Load()), "admitted-ungated")
}

// latencies are the times from each pod's create to its release.
func latencies(rw *releaseWatcher, created *sync.Map, names []string) []time.Duration {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	out := make([]time.Duration, 0, len(names))
	for _, name := range names {
		t, _ := created.Load(name)
		// Under load the release can be seen before the create call
		// returns: count that as no wait.
		out = append(out, max(rw.released[name].Sub(t.(time.Time)), 0))
	}
	return out
}

// countingProxy forwards to the bed's registry and counts requests.
type countingProxy struct {
	host  string
	mu    sync.Mutex
	count map[string]int // "GET manifests", "HEAD manifests", "GET blobs", "GET /v2/"
}

func startCountingProxy(b *testing.B) *countingProxy {
	b.Helper()
	target, _ := url.Parse("http://" + testBed.Registry.Host)
	rp := httputil.NewSingleHostReverseProxy(target)
	cp := &countingProxy{count: map[string]int{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cp.host = l.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := r.URL.Path
		switch {
		case strings.Contains(kind, "/manifests/"):
			kind = "manifests"
		case strings.Contains(kind, "/blobs/"):
			kind = "blobs"
		}
		cp.mu.Lock()
		cp.count[r.Method+" "+kind]++
		cp.mu.Unlock()
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	b.Cleanup(func() { _ = srv.Close() })
	return cp
}

func (cp *countingProxy) take() (total int, byKind map[string]int) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	byKind = cp.count
	cp.count = map[string]int{}
	for _, n := range byKind {
		total += n
	}
	return total, byKind
}

// BenchmarkCacheRoundTrips counts the registry round trips of the image
// cache in front of containers/image: 20 unique images each asked for by 50
// pods at once on a cold cache, then again with pull policy Always.
func BenchmarkCacheRoundTrips(b *testing.B) {
	proxy := startCountingProxy(b)
	refs, _ := benchImages(b, proxy.host)
	ctx := context.Background()
	for range b.N {
		cache := image.NewCache(image.NewRemote(image.RemoteOptions{InsecureRegistries: []string{proxy.host}}), image.CacheOptions{})
		ask := func(refresh bool) {
			var wg sync.WaitGroup
			for _, ref := range refs {
				for range 50 {
					wg.Go(func() {
						if _, _, err := cache.Architectures(ctx, image.Reference{Name: ref, Refresh: refresh}, nil); err != nil {
							b.Error(err)
						}
					})
				}
			}
			wg.Wait()
		}
		ask(false)
		total, byKind := proxy.take()
		b.Logf("cold: %d round trips for %d unique images x 50 pods: %v", total, len(refs), byKind)
		b.ReportMetric(float64(total)/float64(len(refs)), "cold-trips/image")
		ask(false)
		total, _ = proxy.take()
		b.ReportMetric(float64(total)/float64(len(refs)), "warm-trips/image")
		ask(true)
		total, byKind = proxy.take()
		b.Logf("pull policy Always: %d round trips: %v", total, byKind)
		b.ReportMetric(float64(total)/float64(len(refs)), "always-trips/image")
	}
}

// BenchmarkPlacementScale prints the placement controller's cost as curves,
// so that a cost growing with the cluster instead of with the work shows as
// a bent curve. Each point runs a fresh build-controller process with
// --controllers=pod-placement,placement-webhook (as deployed; its CPU and
// peak RSS read from /proc):
//   - release rate and peak RSS against the backlog: the process started on
//     N pods created with the gate (the same 20 images as
//     BenchmarkGateToUngate, half :latest pulled Always), until all are
//     released; the rate from its start (start and cache sync included) and
//     from its first release to its last;
//   - memory against the pods it does not gate: the process started with N
//     pending pods without the gate present in a namespace the
//     ClusterPodPlacementConfig does not select, then releasing 200 gated
//     pods (its caches synced and at work).
//
// It asserts nothing about time.
//
//	go test -tags "containers_image_openpgp exclude_graphdriver_btrfs netgo osusergo libsqlite3" \
//	  -run '^$' -bench PlacementScale -benchtime 1x -timeout 60m ./test/integration/placement/
//
// The sizes come from the environment (comma-separated, ascending; the
// defaults keep a run within a few minutes on 2 cores):
//   - ARCHWAY_BENCH_BACKLOGS: gated backlogs (default "500,2000"; the
//     issue's curve is "2000,10000");
//   - ARCHWAY_BENCH_UNGATED: pods not gated (default "0,2000"; "0,5000");
//   - ARCHWAY_BENCH_REPEAT: rounds over the backlogs (default 1); the curve
//     is drawn from each backlog's median.
//
// ARCHWAY_BENCH_PPROF=127.0.0.1:6060 serves each process's Go pprof
// endpoint there, to profile a point while it runs (e.g. `go tool pprof
// http://127.0.0.1:6060/debug/pprof/profile?seconds=10`).
func BenchmarkPlacementScale(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	backlogs := benchSizes(b, "ARCHWAY_BENCH_BACKLOGS", []int{500, 2000})
	ungated := benchSizes(b, "ARCHWAY_BENCH_UNGATED", []int{0, 2000})
	dir := b.TempDir()
	bin := buildPlacementBinary(ctx, b, dir)
	refs, always := benchImages(b, "")
	// Placement on in labelled namespaces only, so that the pods of the
	// other namespaces are not gated.
	const selectLabel = "placement.archway.dev/bench-scale"
	b.Cleanup(func() { benchConfig(b) })
	if err := applyConfig(ctx, multiarchv1beta1.ClusterPodPlacementConfigSpec{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{selectLabel: "on"}},
	}); err != nil {
		b.Fatal(err)
	}
	// The processes' controllers stand in for the suite's.
	suiteController.stop()
	b.Cleanup(func() {
		var err error
		if suiteController, err = startController(suiteOptions()); err != nil {
			b.Errorf("restarting the suite controller: %v", err)
		}
	})
	gatedPod := func(ns, name string, i int) *corev1.Pod {
		w := makePod(ns, name).image(refs[i%len(refs)]).nodeSelector(unschedulableKey, "true").withGate()
		if always[refs[i%len(refs)]] {
			w.pullAlways()
		}
		return w.obj()
	}
	b.ResetTimer()

	// Each round runs every backlog once, smallest first in even rounds
	// and largest first in odd ones; with ARCHWAY_BENCH_REPEAT rounds, the
	// curve is drawn from each backlog's median, so that the machine's
	// drift (a shared VM's speed varies by 15% over minutes, and load that
	// rises through a run would fall on the larger backlogs) is not read
	// as a bend.
	repeat := 1
	if v := os.Getenv("ARCHWAY_BENCH_REPEAT"); v != "" {
		r, err := strconv.Atoi(v)
		if err != nil || r < 1 {
			b.Fatalf("ARCHWAY_BENCH_REPEAT=%q: want a count of rounds, 1 or more", v)
		}
		repeat = r
	}
	var lines []string
	fromStart := map[int][]float64{}
	span := map[int][]float64{}
	for round := range repeat * len(backlogs) {
		n := backlogs[round%len(backlogs)]
		if (round/len(backlogs))%2 == 1 {
			n = backlogs[len(backlogs)-1-round%len(backlogs)]
		}
		ns := benchLabelledNamespace(b, "bench-backlog", map[string]string{selectLabel: "on"})
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("backlog-%05d", i)
		}
		if err := createPods(ctx, n, 50, func(i int) *corev1.Pod { return gatedPod(ns, names[i], i) }); err != nil {
			b.Fatal(err)
		}
		rw := watchReleases(b, ns)
		requestsBefore, err := testBed.APIRequests(ctx)
		if err != nil {
			b.Fatal(err)
		}
		cpuBefore, err := bed.ProcessCPU()
		if err != nil {
			b.Fatal(err)
		}
		// The webhook alone, as its own Deployment runs it: it keeps gated
		// pods' names (to tie events to them), so its memory may grow by a
		// name per gated pod, and nothing per pod it does not gate.
		webhook := startPlacementProcess(ctx, b, bin, dir, fmt.Sprintf("backlog-%d-webhook", n), "--controllers=placement-webhook")
		webhookRSS, _ := webhook.memory(b)
		if err := webhook.stop(); err != nil {
			b.Logf("build-controller (webhook) exited: %v", err)
		}
		start := time.Now()
		proc := startPlacementProcess(ctx, b, bin, dir, fmt.Sprintf("backlog-%d", n), pprofArgs()...)
		rw.wait(b, names, 10*time.Minute)
		elapsed := time.Since(start)
		cpuAfter, err := bed.ProcessCPU()
		if err != nil {
			b.Fatal(err)
		}
		requestsAfter, err := testBed.APIRequests(ctx)
		if err != nil {
			b.Fatal(err)
		}
		requests := requestsAfter.Sub(requestsBefore)
		writes := requests.Writes()
		first, last := rw.span(names)
		cpu := proc.cpu(b)
		_, peak := proc.memory(b)
		load := loadAverage()
		if err := proc.stop(); err != nil {
			b.Logf("build-controller exited: %v", err)
		}
		rw.stop()
		deletePods(ctx, ns)
		line := fmt.Sprintf("  backlog %6d gated pods: %6.0f pods/s from start (%5.1f s), %6.0f pods/s first to last release; controller CPU %6.2f s (%5.2f ms/pod), peak RSS %6.1f MiB; load %s",
			n, float64(n)/elapsed.Seconds(), elapsed.Seconds(), float64(n-1)/last.Sub(first).Seconds(), cpu, 1000*cpu/float64(n), peak, load)
		// Who else paid, per pod: on 2 cores the apiserver, etcd and the
		// scheduler share the CPU with the controller, so a bend in the
		// rate shows here first.
		line += fmt.Sprintf("\n    webhook alone (its informers synced on the backlog) RSS %.1f MiB", webhookRSS)
		line += fmt.Sprintf("\n    apiserver writes per pod %.2f; CPU ms per pod by process:%s", writes/float64(n), perPod(cpuAfter.Sub(cpuBefore), n))
		line += "\n    apiserver requests per pod:" + requestsPerPod(requests, n)
		line += "\n    pods/s by tenth of the releases:" + rateByTenth(rw.times(names))
		fmt.Println("placement scale:" + line)
		lines = append(lines, line)
		fromStart[n] = append(fromStart[n], float64(n)/elapsed.Seconds())
		span[n] = append(span[n], float64(n-1)/last.Sub(first).Seconds())
		b.ReportMetric(peak, fmt.Sprintf("backlog%d-peak-rss-MiB", n))
	}
	for _, n := range backlogs {
		b.ReportMetric(median(fromStart[n]), fmt.Sprintf("backlog%d-pods/s", n))
	}
	if repeat > 1 || len(backlogs) > 1 {
		lines = append(lines, "  release rate by backlog, median of "+strconv.Itoa(repeat)+" round(s) (range), and against the smallest backlog:")
		for _, n := range backlogs {
			lines = append(lines, fmt.Sprintf("    %6d gated pods: from start %6.0f pods/s (%.0f-%.0f) %+6.1f%%, first to last %6.0f pods/s (%.0f-%.0f) %+6.1f%%",
				n, median(fromStart[n]), slices.Min(fromStart[n]), slices.Max(fromStart[n]), 100*(median(fromStart[n])/median(fromStart[backlogs[0]])-1),
				median(span[n]), slices.Min(span[n]), slices.Max(span[n]), 100*(median(span[n])/median(span[backlogs[0]])-1)))
		}
	}

	// Pods it does not gate: pending (no node will take them, so they stay
	// in the controller's cache of unbound pods) in a namespace the config
	// does not select; each point adds to the last.
	other := benchLabelledNamespace(b, "bench-ungated", nil)
	have := 0
	for _, n := range ungated {
		err := createPods(ctx, n-have, 50, func(i int) *corev1.Pod {
			return makePod(other, fmt.Sprintf("ungated-%05d", have+i)).image(imgAll).nodeSelector(unschedulableKey, "true").obj()
		})
		if err != nil {
			b.Fatal(err)
		}
		have = n
		gatedNow, total, err := countGated(ctx, other)
		if err != nil {
			b.Fatal(err)
		}
		if gatedNow > 0 {
			b.Fatalf("%d of %d pods in a namespace the config does not select were gated", gatedNow, total)
		}
		ns := benchLabelledNamespace(b, "bench-probe", map[string]string{selectLabel: "on"})
		const probes = 200
		names := make([]string, probes)
		for i := range names {
			names[i] = fmt.Sprintf("probe-%03d", i)
		}
		if err := createPods(ctx, probes, 20, func(i int) *corev1.Pod { return gatedPod(ns, names[i], i) }); err != nil {
			b.Fatal(err)
		}
		webhook := startPlacementProcess(ctx, b, bin, dir, fmt.Sprintf("ungated-%d-webhook", n), "--controllers=placement-webhook")
		webhookRSS, _ := webhook.memory(b)
		if err := webhook.stop(); err != nil {
			b.Logf("build-controller (webhook) exited: %v", err)
		}
		rw := watchReleases(b, ns)
		proc := startPlacementProcess(ctx, b, bin, dir, fmt.Sprintf("ungated-%d", n), pprofArgs()...)
		rw.wait(b, names, 5*time.Minute)
		rss, peak := proc.memory(b)
		load := loadAverage()
		if err := proc.stop(); err != nil {
			b.Logf("build-controller exited: %v", err)
		}
		rw.stop()
		deletePods(ctx, ns)
		line := fmt.Sprintf("  %6d pods not gated: webhook and controller RSS %6.1f MiB, peak %6.1f MiB (after releasing %d gated pods); webhook alone RSS %6.1f MiB; load %s",
			n, rss, peak, probes, webhookRSS, load)
		fmt.Println("placement scale:" + line)
		lines = append(lines, line)
		b.ReportMetric(peak, fmt.Sprintf("ungated%d-peak-rss-MiB", n))
	}
	deletePods(ctx, other)
	fmt.Printf("placement scale: release rate and memory by backlog, memory by pods not gated:\n%s\n", strings.Join(lines, "\n"))
}

// requestsPerPod formats the apiserver's requests by verb and resource per
// pod of n, the most frequent first, leaving out those below one per 100
// pods: a kind of request whose count per pod grows with the backlog is a
// cost growing with the cluster.
func requestsPerPod(r bed.Counts, n int) string {
	keys := slices.SortedFunc(maps.Keys(r), func(a, b string) int { return cmp.Compare(r[b], r[a]) })
	var sb strings.Builder
	for _, k := range keys {
		if per := r[k] / float64(n); per >= 0.01 {
			fmt.Fprintf(&sb, " %s %.2f,", k, per)
		}
	}
	return strings.TrimSuffix(sb.String(), ",")
}

// median is the middle of xs (the mean of the two middle ones for an even
// count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// perPod formats CPU seconds by process as milliseconds per pod of n, the
// busiest first (this benchmark's test process watches the releases).
func perPod(cpu bed.Counts, n int) string {
	names := make([]string, 0, len(cpu))
	for name, s := range cpu {
		if s >= 0.005 {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool { return cpu[names[i]] > cpu[names[j]] })
	var sb strings.Builder
	for _, name := range names {
		fmt.Fprintf(&sb, " %s %.2f,", name, 1000*cpu[name]/float64(n))
	}
	return strings.TrimSuffix(sb.String(), ",")
}

// rateByTenth is the release rate over each tenth of the releases in time
// order: flat if a release costs the same with 10 or 10,000 pods released
// before it.
func rateByTenth(times []time.Time) string {
	ts := slices.Clone(times)
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	if len(ts) < 20 {
		return " (too few)"
	}
	var sb strings.Builder
	for i := range 10 {
		from, to := i*(len(ts)-1)/10, (i+1)*(len(ts)-1)/10
		fmt.Fprintf(&sb, " %.0f", float64(to-from)/ts[to].Sub(ts[from]).Seconds())
	}
	return sb.String()
}

// pprofArgs are the flags that serve a benchmark process's pprof endpoint at
// $ARCHWAY_BENCH_PPROF, if set.
func pprofArgs() []string {
	if addr := os.Getenv("ARCHWAY_BENCH_PPROF"); addr != "" {
		return []string{"--pprof-bind-address=" + addr}
	}
	return nil
}

// benchLabelledNamespace creates a namespace with labels; its pods go when
// the benchmark ends.
func benchLabelledNamespace(b *testing.B, prefix string, labels map[string]string) string {
	b.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { deletePods(context.Background(), ns.Name) })
	return ns.Name
}

// benchSizes reads a comma-separated list of counts (0 or more) from the
// environment variable name, or returns def.
func benchSizes(b *testing.B, name string, def []int) []int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || (len(out) > 0 && n < out[len(out)-1]) {
			b.Fatalf("%s=%q: want ascending comma-separated counts", name, v)
		}
		out = append(out, n)
	}
	return out
}

// span is when the first and the last of names were seen released.
func (rw *releaseWatcher) span(names []string) (first, last time.Time) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	for _, n := range names {
		t := rw.released[n]
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}

// count is how many pods were seen released.
func (rw *releaseWatcher) count() int {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return len(rw.released)
}

// times are the release times of names (zero for those not released).
func (rw *releaseWatcher) times(names []string) []time.Time {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	out := make([]time.Time, len(names))
	for i, n := range names {
		out[i] = rw.released[n]
	}
	return out
}
