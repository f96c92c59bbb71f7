package buildconfig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	archwayplugin "github.com/archway-build/archway/pkg/build/plugin"
	"github.com/archway-build/archway/test/bed"
)

// syncBuffer collects a command's output as it is written, for a test to
// wait on.
type syncBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the output matches re.
func (b *syncBuffer) waitFor(t testing.TB, ctx context.Context, re string) {
	t.Helper()
	r := regexp.MustCompile(re)
	if err := waitPoll(ctx, func() bool { return r.MatchString(b.String()) }); err != nil {
		t.Fatalf("the output never matched %s:\n%q", re, b.String())
	}
}

// patchStatus writes a Build's status as the Build controller would.
func (h *harness) patchStatus(name, status string) {
	h.t.Helper()
	b := &buildv1.Build{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
	if err := k8s.Status().Patch(h.ctx, b, client.RawPatch(types.MergePatchType, []byte(`{"status":`+status+`}`))); err != nil {
		h.t.Fatal(err)
	}
}

// countingProxy stands between a command and the apiserver and counts the
// command's requests by "VERB path" (VERB GET, LIST, WATCH, POST, ...).
type countingProxy struct {
	kubeconfig string
	mu         sync.Mutex
	n          map[string]int
}

func newCountingProxy(t *testing.T) *countingProxy {
	t.Helper()
	target, err := url.Parse(testBed.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(testBed.Config)
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{n: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verb := r.Method
		collection := strings.HasSuffix(r.URL.Path, "/pods") || strings.HasSuffix(r.URL.Path, "/builds") || strings.HasSuffix(r.URL.Path, "/buildconfigs")
		switch {
		case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
			verb = "WATCH"
		case r.Method == http.MethodGet && collection:
			verb = "LIST"
		}
		p.mu.Lock()
		p.n[verb+" "+r.URL.Path]++
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: srv.URL}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *countingProxy) counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.n)
}

// TestPluginFollowWatchesOnATerminal: start-build --follow on a terminal
// (a pty) keeps the per-platform table below the output and redraws it in
// place as the Build's status and its pods change, and learns of each
// change from watches: while it follows, it makes no GET of the Build and
// no more than one LIST of pods (a poll makes one of each per tick).
func TestPluginFollowWatchesOnATerminal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "plugin-watch")
	h.create(h.bcObj("app", buildv1.BuildRunPolicyParallel))
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 160}); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	go func() { _, _ = io.Copy(&out, ptmx) }()

	proxy := newCountingProxy(t)
	done := make(chan error, 1)
	go func() {
		cmd := archwayplugin.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: tty, ErrOut: tty})
		cmd.SetArgs([]string{"start-build", "app", "--follow", "--kubeconfig", proxy.kubeconfig, "-n", h.ns})
		done <- cmd.ExecuteContext(h.ctx)
	}()
	out.waitFor(t, h.ctx, `build app-1 New\r?\nPLATFORM`)
	h.patchStatus("app-1", `{"phase":"Pending","platforms":[{"platform":"linux/amd64","phase":"Pending","podName":"app-1-amd64"},{"platform":"linux/arm64","phase":"Pending"}]}`)
	out.waitFor(t, h.ctx, `linux/arm64 +Pending`)
	// The pod's node reaches the table through the pod watch.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: "app-1-amd64", Labels: map[string]string{buildv1.BuildLabel: "app-1"},
			Annotations: map[string]string{buildv1.PlatformAnnotation: "linux/amd64"}},
		Spec: corev1.PodSpec{NodeName: "node-amd64-1", Containers: []corev1.Container{{Name: "build", Image: "registry.example.com/archway/builder:test"}}},
	}
	h.create(pod)
	out.waitFor(t, h.ctx, `linux/amd64 +Pending +- +node-amd64-1`)
	h.patchStatus("app-1", `{"phase":"Running","platforms":[{"platform":"linux/amd64","phase":"Running","podName":"app-1-amd64"},{"platform":"linux/arm64","phase":"Pending"}]}`)
	out.waitFor(t, h.ctx, `linux/amd64 +Running`)
	h.patchStatus("app-1", `{"phase":"Complete","platformsSummary":"2/2","platforms":[{"platform":"linux/amd64","phase":"Complete","podName":"app-1-amd64"},{"platform":"linux/arm64","phase":"Complete"}]}`)
	if err := <-done; err != nil {
		t.Fatalf("--follow: %v\n%q", err, out.String())
	}
	builds := "/apis/build.openshift.io/v1/namespaces/" + h.ns + "/builds"
	pods := "/api/v1/namespaces/" + h.ns + "/pods"
	requests := proxy.counts()
	if requests["GET "+builds+"/app-1"] != 0 || requests["LIST "+pods] > 1 || requests["WATCH "+builds] < 1 || requests["WATCH "+pods] < 1 {
		t.Errorf("the command's requests while following: %v; want no GET of the build, at most one LIST of pods, and watches of both", requests)
	}
	out.waitFor(t, h.ctx, `build app-1 Complete \(2/2\)`)
	// Each redraw moves the cursor up over the old table (ESC[nF) and
	// clears below it (ESC[J); the table is written once per change.
	got := out.String()
	if n := strings.Count(got, "\x1b[J"); n < 3 || !regexp.MustCompile(`\x1b\[[0-9]+F\x1b\[J`).MatchString(got) {
		t.Errorf("%d redraws in place, want one per change (3 or more):\n%q", n, got)
	}
	if strings.Contains(got, "--- ") {
		t.Errorf("change lines on a terminal:\n%q", got)
	}
}

// TestPluginLogs: logs bc/NAME reads the BuildConfig's latest build (and
// --version N an earlier one), each line prefixed with its platform;
// --tail, --since, --since-time, --timestamps and --platform shape it as
// kubectl logs does. The build pods are processes run by the bed's pod
// runner, their logs served through the kubelet API.
func TestPluginLogs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "plugin-logs")
	runner, err := testBed.StartPodRunner(h.ctx, bed.RunnerOptions{Images: map[string]string{"registry.example.com/test/shell": "/bin/sh"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runner.Stop)
	h.create(h.bcObj("app", buildv1.BuildRunPolicyParallel))
	for range 2 {
		if _, err := plugin(h.ctx, h.ns, "start-build", "app"); err != nil {
			t.Fatal(err)
		}
	}
	signal := t.TempDir()
	// Each platform's pod of a build prints its lines, then (the second
	// build's) waits for the test's signal to print its last one.
	pod := func(build, plat, node, script string) {
		name := build + "-" + strings.ReplaceAll(plat, "/", "-")
		h.create(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name, Labels: map[string]string{buildv1.BuildLabel: build},
				Annotations: map[string]string{buildv1.PlatformAnnotation: plat}},
			Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "build", Image: "registry.example.com/test/shell:1", Command: []string{"/bin/sh", "-c", script}}}},
		})
	}
	pod("app-1", "linux/amd64", "node-amd64-1", "echo old build")
	wait := fmt.Sprintf("while [ ! -e %s/go ]; do sleep 0.05; done", signal)
	pod("app-2", "linux/amd64", "node-amd64-1", "echo amd64 one; echo amd64 two; echo amd64 three; "+wait+"; echo amd64 last")
	pod("app-2", "linux/arm64", "node-arm64-1", "echo arm64 one; echo arm64 two")
	waitLogs := func(args []string, want string) string {
		t.Helper()
		var out string
		err := waitPoll(h.ctx, func() bool {
			out, _ = plugin(h.ctx, h.ns, args...)
			return strings.Contains(out, want)
		})
		if err != nil {
			t.Fatalf("logs %v never had %q: %q", args, want, out)
		}
		return out
	}
	waitLogs([]string{"logs", "bc/app"}, "[linux/arm64] arm64 two")
	out := waitLogs([]string{"logs", "bc/app"}, "[linux/amd64] amd64 three")
	if !strings.Contains(out, "[linux/amd64] amd64 one\n[linux/amd64] amd64 two\n[linux/amd64] amd64 three\n") || strings.Contains(out, "old build") {
		t.Errorf("logs bc/app: %q", out)
	}
	if out := waitLogs([]string{"logs", "bc/app", "--version", "1"}, "old build"); out != "old build\n" {
		t.Errorf("logs bc/app --version 1: %q", out)
	}
	out, err = plugin(h.ctx, h.ns, "logs", "bc/app", "--tail", "1", "--platform", "linux/amd64")
	if err != nil || out != "amd64 three\n" {
		t.Errorf("--tail 1 --platform linux/amd64: %v, %q", err, out)
	}
	out, err = plugin(h.ctx, h.ns, "logs", "build/app-2", "--timestamps", "--platforms", "linux/arm64,linux/amd64", "--tail", "1")
	stamped := regexp.MustCompile(`(?m)^\[linux/(amd64|arm64)\] (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z) (amd64 three|arm64 two)$`)
	if m := stamped.FindAllStringSubmatch(out, -1); err != nil || len(m) != 2 {
		t.Fatalf("--timestamps: %v, %q", err, out)
	}
	// The later of the two lines (the pods start one after the other, a
	// second or more apart on a loaded machine).
	var latest time.Time
	for _, m := range stamped.FindAllStringSubmatch(out, -1) {
		at, err := time.Parse(time.RFC3339Nano, m[2])
		if err != nil {
			t.Fatal(err)
		}
		if at.After(latest) {
			latest = at
		}
	}
	// --since-time at the next whole second after the lines so far, and
	// --since shorter than their age: the last line, printed after both,
	// is all they show.
	sinceTime := latest.Truncate(time.Second).Add(time.Second)
	const age = 8 * time.Second
	if err := waitPoll(h.ctx, func() bool { return time.Now().After(latest.Add(age)) }); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(signal, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitLogs([]string{"logs", "bc/app"}, "[linux/amd64] amd64 last")
	out, err = plugin(h.ctx, h.ns, "logs", "bc/app", "--platform", "linux/amd64", "--since-time", sinceTime.Format(time.RFC3339))
	if err != nil || out != "amd64 last\n" {
		t.Errorf("--since-time %s: %v, %q", sinceTime.Format(time.RFC3339), err, out)
	}
	out, err = plugin(h.ctx, h.ns, "logs", "bc/app", "--since", (age / 2).String())
	if err != nil || out != "[linux/amd64] amd64 last\n" {
		t.Errorf("--since %s: %v, %q", age/2, err, out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"logs", "bc/app", "--version", "7"}, "buildconfig app has no build number 7; its builds are numbered 1, 2"},
		{[]string{"logs", "build/app-2", "--version", "1"}, "--version picks a build of a BuildConfig: give bc/NAME"},
		{[]string{"logs", "bc/app", "--since", "1m", "--since-time", "2026-01-01T00:00:00Z"}, "give one of --since and --since-time"},
		{[]string{"logs", "bc/app", "--tail", "-2"}, "--tail -2"},
		{[]string{"logs", "bc/app", "--platform", "linux/s390x"}, "--platform linux/s390x: the build has no pod for it"},
		{[]string{"logs", "bc/nope"}, `buildconfig "nope" not found`},
	} {
		if _, err := plugin(h.ctx, h.ns, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	if errors.Is(h.ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("out of time")
	}
}
