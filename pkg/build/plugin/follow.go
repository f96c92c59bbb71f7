package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// logsDrainTimeout bounds the wait, once a build has ended, for its pods'
// log streams to end: a kubelet that never closes a stream must not hold
// the command.
const logsDrainTimeout = 10 * time.Second

// follower follows a build to its end, driven by watches of the Build and
// of its pods (never by polling): it shows each platform's progress
// (table) and streams every pod's log from when the pod starts (logs).
// On a terminal (tty) the per-platform table stays below the logs and is
// redrawn in place; elsewhere each change is a line, and the table is
// printed once at the end.
type follower struct {
	c     client.WithWatch
	cs    kubernetes.Interface
	ns    string
	name  string
	out   io.Writer
	logs  bool
	table bool
	tty   bool
	// only, when set, streams the logs of these platforms' pods alone
	// (or the manifest-list pod's); with one platform its prefix is left
	// out.
	only []string
	// logOptions are the options of each log stream (tail, since,
	// timestamps, limit); Follow is set.
	logOptions corev1.PodLogOptions
}

func (f *follower) run(ctx context.Context) (*buildv1.Build, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changed := make(chan struct{}, 1)
	failed := make(chan error, 2)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	builds := cache.NewSharedIndexInformer(f.buildListWatch(), &buildv1.Build{}, 0, cache.Indexers{})
	pods := cache.NewSharedIndexInformer(f.podListWatch(), &corev1.Pod{}, 0, cache.Indexers{})
	for _, inf := range []cache.SharedIndexInformer{builds, pods} {
		handler := cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { notify() },
			UpdateFunc: func(any, any) { notify() },
			DeleteFunc: func(any) { notify() },
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, err
		}
		// A refusal (RBAC, a missing API) ends the command; an expired
		// watch is resumed by the informer.
		if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return
			}
			select {
			case failed <- err:
			default:
			}
		}); err != nil {
			return nil, err
		}
		go inf.RunWithContext(ctx)
	}
	// The first look, once both caches hold what the apiserver has.
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), builds.HasSynced, pods.HasSynced) {
			notify()
		}
	}()

	w := newLineWriter(f.out, f.tty && f.table)
	streaming := map[string]bool{}
	var wg sync.WaitGroup
	logCtx, stopLogs := context.WithCancel(ctx)
	defer stopLogs()
	var last map[string]string
	var final *buildv1.Build
	for final == nil {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-failed:
			return nil, fmt.Errorf("following build %s: %w", f.name, err)
		case <-changed:
		}
		if !builds.HasSynced() || !pods.HasSynced() {
			continue
		}
		obj, exists, err := builds.GetStore().GetByKey(f.ns + "/" + f.name)
		if err != nil {
			return nil, err
		}
		if !exists {
			return nil, fmt.Errorf("build %s was deleted (or is not in namespace %s)", f.name, f.ns)
		}
		b := obj.(*buildv1.Build)
		var podList []corev1.Pod
		for _, p := range pods.GetStore().List() {
			podList = append(podList, *p.(*corev1.Pod))
		}
		bpods := sortBuildPods(podList)
		if f.table {
			last = f.showProgress(w, b, bpods, last)
		}
		if f.logs {
			f.streamNew(logCtx, &wg, w, b, bpods, streaming)
		}
		if b.Status.Phase.IsTerminal() {
			final = b.DeepCopy()
			if f.table {
				f.showEnd(w, final, bpods)
			}
		}
	}
	// The pods have ended or are ending: their logs end soon.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(logsDrainTimeout):
		stopLogs()
		<-done
	}
	return final, nil
}

// buildListWatch lists and watches the one Build.
func (f *follower) buildListWatch() cache.ListerWatcher {
	selector := fields.OneTermEqualSelector("metadata.name", f.name).String()
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			list := &buildv1.BuildList{}
			err := f.c.List(ctx, list, &client.ListOptions{Namespace: f.ns, Raw: &opts})
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return f.c.Watch(ctx, &buildv1.BuildList{}, &client.ListOptions{Namespace: f.ns, Raw: &opts})
		},
	}
}

// podListWatch lists and watches the build's pods.
func (f *follower) podListWatch() cache.ListerWatcher {
	selector := buildv1.PodSelector(f.name)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = selector
			return f.cs.CoreV1().Pods(f.ns).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = selector
			return f.cs.CoreV1().Pods(f.ns).Watch(ctx, opts)
		},
	}
}

// showProgress shows what changed since last (the rows shown before, by
// key): on a terminal the table, redrawn; elsewhere a line per change.
func (f *follower) showProgress(w *lineWriter, b *buildv1.Build, pods []buildPod, last map[string]string) map[string]string {
	rows := progressRows(b, pods)
	if f.tty {
		if !mapsEqual(rows, last) {
			w.setStatus(fmt.Sprintf("build %s %s\n%s", b.Name, phaseOf(b), platformTable(b, pods, false)))
		}
		return rows
	}
	now := time.Now().Format("15:04:05")
	for _, k := range progressOrder(b) {
		if rows[k] != last[k] {
			w.line("", fmt.Sprintf("--- %s %s: %s", now, k, rows[k]))
		}
	}
	return rows
}

// showEnd leaves the final table: on a terminal the status block stays as
// it is; elsewhere the table is printed once.
func (f *follower) showEnd(w *lineWriter, b *buildv1.Build, pods []buildPod) {
	if f.tty {
		w.endStatus()
		return
	}
	w.line("", fmt.Sprintf("build %s %s\n%s", b.Name, phaseOf(b), strings.TrimSuffix(platformTable(b, pods, false), "\n")))
}

// progressRows is each platform's state as a change line says it, keyed by
// platform, and the build's own under "build NAME".
func progressRows(b *buildv1.Build, pods []buildPod) map[string]string {
	nodes := map[string]string{}
	for _, p := range pods {
		nodes[p.pod.Name] = p.pod.Spec.NodeName
	}
	rows := map[string]string{"build " + b.Name: phaseOf(b)}
	for _, e := range b.Status.Platforms {
		s := string(e.Phase)
		if s == "" {
			s = string(buildv1.BuildPhaseNew)
		}
		if e.Reason != "" {
			s += " (" + string(e.Reason) + ")"
		}
		if n := nodes[e.PodName]; n != "" {
			s += " on " + n
		}
		if e.EmulatedOn != "" {
			s += ", emulated on " + e.EmulatedOn
		}
		rows[e.Platform] = s
	}
	return rows
}

func progressOrder(b *buildv1.Build) []string {
	keys := []string{"build " + b.Name}
	for _, e := range b.Status.Platforms {
		keys = append(keys, e.Platform)
	}
	return keys
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// streamNew starts streaming the log of every started pod not streamed yet
// (of the platforms in only, when set).
func (f *follower) streamNew(ctx context.Context, wg *sync.WaitGroup, w *lineWriter, b *buildv1.Build, pods []buildPod, streaming map[string]bool) {
	multi := (len(pods) > 1 || len(b.Status.Platforms) > 1) && len(f.only) != 1
	for i := range pods {
		p := pods[i]
		if streaming[p.pod.Name] || !podStarted(&p.pod) {
			continue
		}
		if len(f.only) > 0 && !slices.ContainsFunc(f.only, func(w string) bool { return p.platform == w || samePlatform(p.platform, w) }) {
			continue
		}
		streaming[p.pod.Name] = true
		prefix := ""
		if multi {
			prefix = p.platform
		}
		opts := f.logOptions
		opts.Follow = true
		wg.Go(func() {
			if err := streamLogs(ctx, f.cs, &p.pod, &opts, prefix, w); err != nil {
				w.line(prefix, "error: "+err.Error())
			}
		})
	}
}

func phaseOf(b *buildv1.Build) string {
	s := string(b.Status.Phase)
	if s == "" {
		s = string(buildv1.BuildPhaseNew)
	}
	if b.Status.PlatformsSummary != "" {
		s += " (" + b.Status.PlatformsSummary + ")"
	}
	return s
}

// platformTable is the per-platform table: platform, phase, reason, node,
// and (withDetails) digest and duration; when a platform is built under
// emulation, a column with the architecture of the node it runs on.
func platformTable(b *buildv1.Build, pods []buildPod, withDetails bool) string {
	nodes := map[string]string{}
	for _, p := range pods {
		nodes[p.pod.Name] = p.pod.Spec.NodeName
	}
	emulated := slices.ContainsFunc(b.Status.Platforms, func(e buildv1.BuildStatusPlatform) bool { return e.EmulatedOn != "" })
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	header := []string{"PLATFORM", "PHASE", "REASON", "NODE"}
	if emulated {
		header = append(header, "EMULATED ON")
	}
	if withDetails {
		header = append(header, "DIGEST", "DURATION")
	}
	_, _ = fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, e := range b.Status.Platforms {
		phase := string(e.Phase)
		if phase == "" {
			phase = string(buildv1.BuildPhaseNew)
		}
		row := []string{e.Platform, phase, dash(string(e.Reason)), dash(nodes[e.PodName])}
		if emulated {
			row = append(row, dash(e.EmulatedOn))
		}
		if withDetails {
			digest := ""
			if e.Output != nil {
				digest = e.Output.ImageDigest
			}
			row = append(row, dash(digest), dash(duration(e.StartTimestamp, e.CompletionTimestamp)))
		}
		_, _ = fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	_ = tw.Flush()
	return buf.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
