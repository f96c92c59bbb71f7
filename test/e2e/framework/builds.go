package framework

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/test/bed"
)

// StartBuild starts the next build of a BuildConfig as kubectl archway
// start-build does (package instantiate), as a user asking by hand.
func StartBuild(ctx context.Context, c client.Client, bc *buildv1.BuildConfig) (*buildv1.Build, error) {
	return instantiate.NewStarter(c, nil).Start(ctx, bc.Namespace, bc.Name, instantiate.Request{
		TriggeredBy: []buildv1.BuildTriggerCause{{Message: instantiate.CauseManual}},
	})
}

// PodTimes are when a watcher first saw a pod in each state.
type PodTimes struct {
	Created, Bound, Running, Finished time.Time
	// Node is the node the pod was bound to; Phase its latest phase.
	Node  string
	Phase corev1.PodPhase
}

// Timeline records, with a watch on the Build and one on its pods, when
// each step of a build was first seen from outside: the figures of the
// orchestration benchmark and the demo's progress table. Times are
// observation times in this process (API timestamps have 1 s resolution).
type Timeline struct {
	// Created is when the Build was created (set by the caller just
	// before the create call).
	Created time.Time

	mu        sync.Mutex
	buildSeen time.Time // the Build's first watch event
	pods      map[string]*PodTimes
	entries   map[string]time.Time // platform entry first seen terminal
	build     *buildv1.Build
	terminal  time.Time
	done      chan struct{}
}

// WatchBuild starts watching the pods and the Build ns/name until ctx ends
// or the Build reaches a terminal phase. Call it before creating the Build.
func WatchBuild(ctx context.Context, c client.WithWatch, ns, name string) (*Timeline, error) {
	tl := &Timeline{pods: map[string]*PodTimes{}, entries: map[string]time.Time{}, done: make(chan struct{})}
	pw, err := c.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns), client.MatchingLabels{buildv1.BuildLabel: buildv1.LabelValue(name)})
	if err != nil {
		return nil, err
	}
	bw, err := c.Watch(ctx, &buildv1.BuildList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		pw.Stop()
		return nil, err
	}
	go func() {
		defer pw.Stop()
		for ev := range pw.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Error {
				tl.observePod(pod, time.Now())
			}
		}
	}()
	go func() {
		defer bw.Stop()
		defer close(tl.done)
		for ev := range bw.ResultChan() {
			b, ok := ev.Object.(*buildv1.Build)
			if !ok || ev.Type == watch.Error {
				continue
			}
			tl.mu.Lock()
			if tl.buildSeen.IsZero() {
				tl.buildSeen = time.Now()
			}
			tl.build = b.DeepCopy()
			for _, e := range b.Status.Platforms {
				if _, seen := tl.entries[e.Platform]; !seen && e.Phase.IsTerminal() {
					tl.entries[e.Platform] = time.Now()
				}
			}
			terminal := b.Status.Phase.IsTerminal()
			if terminal && tl.terminal.IsZero() {
				tl.terminal = time.Now()
			}
			tl.mu.Unlock()
			if terminal {
				return
			}
		}
	}()
	return tl, nil
}

func (tl *Timeline) observePod(pod *corev1.Pod, now time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	pt := tl.pods[pod.Name]
	if pt == nil {
		pt = &PodTimes{Created: now}
		tl.pods[pod.Name] = pt
	}
	pt.Phase = pod.Status.Phase
	if pod.Spec.NodeName != "" && pt.Bound.IsZero() {
		pt.Bound, pt.Node = now, pod.Spec.NodeName
	}
	switch pod.Status.Phase {
	case corev1.PodRunning:
		if pt.Running.IsZero() {
			pt.Running = now
		}
	case corev1.PodSucceeded, corev1.PodFailed:
		if pt.Running.IsZero() {
			pt.Running = now
		}
		if pt.Finished.IsZero() {
			pt.Finished = now
		}
	}
}

// Done is closed once the Build is terminal (or the watch ended).
func (tl *Timeline) Done() <-chan struct{} { return tl.done }

// Build returns the latest Build seen (nil before the first event) and
// when it was first seen terminal.
func (tl *Timeline) Build() (*buildv1.Build, time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.build, tl.terminal
}

// Pod returns what was seen of a pod (ok false if never seen).
func (tl *Timeline) Pod(name string) (PodTimes, bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	pt, ok := tl.pods[name]
	if !ok {
		return PodTimes{}, false
	}
	return *pt, true
}

// PodNames lists the pods seen.
func (tl *Timeline) PodNames() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return slices.Sorted(maps.Keys(tl.pods))
}

// Overhead is what archway adds on top of the builds themselves, from one
// build's Timeline.
type Overhead struct {
	// Wall is Build creation to Complete; LongestRun the longest platform
	// pod's own run (Running to finished).
	Wall, LongestRun time.Duration
	// Created is the part of FanOut before the Build was first seen: the
	// start of the build (instantiate, when started from a BuildConfig)
	// and the watch's delivery.
	Created time.Duration
	// FanOut is creation to all platform pods created; Scheduling to all
	// bound; PodStart to all running; ManifestList is the last platform
	// finishing to the Build Complete: the manifest-list pod, created with
	// the platform pods and waiting, sees the last entry, pushes the list
	// and ends, and the controller sees it end. Noticed is the last
	// platform finishing to the manifest-list pod's creation, when that pod
	// was created after it (a pod deleted and made again at the end), else
	// 0. A platform is finished when its builder reports it in the Build's
	// status or its pod ends, whichever is seen first.
	FanOut, Scheduling, PodStart, Noticed, ManifestList time.Duration
}

// Total is Wall minus LongestRun.
func (o Overhead) Total() time.Duration { return o.Wall - o.LongestRun }

// Overhead computes the breakdown for a finished build of platforms with a
// manifest-list pod.
func (tl *Timeline) Overhead(buildName string, platforms []string) (Overhead, error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var o Overhead
	if tl.terminal.IsZero() {
		return o, fmt.Errorf("build %s has not finished", buildName)
	}
	var created, bound, running, finished time.Time
	for _, p := range platforms {
		pt, ok := tl.pods[buildv1.PlatformPodName(buildName, p)]
		if !ok || pt.Finished.IsZero() {
			return o, fmt.Errorf("the pod of %s was not seen from start to end", p)
		}
		end := pt.Finished
		if t, ok := tl.entries[p]; ok && t.Before(end) {
			end = t
		}
		created, bound = later(created, pt.Created), later(bound, pt.Bound)
		running, finished = later(running, pt.Running), later(finished, end)
		o.LongestRun = max(o.LongestRun, end.Sub(pt.Running))
	}
	ml, ok := tl.pods[buildv1.ManifestListPodName(buildName)]
	if !ok {
		return o, fmt.Errorf("no manifest-list pod was seen")
	}
	o.Wall = tl.terminal.Sub(tl.Created)
	o.FanOut = created.Sub(tl.Created)
	if !tl.buildSeen.IsZero() {
		o.Created = tl.buildSeen.Sub(tl.Created)
	}
	o.Scheduling = bound.Sub(created)
	o.PodStart = running.Sub(bound)
	mlFrom := finished
	if ml.Created.After(finished) {
		o.Noticed, mlFrom = ml.Created.Sub(finished), ml.Created
	}
	o.ManifestList = tl.terminal.Sub(mlFrom)
	return o, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// BuildHello runs the smallest four-platform build end to end: in a new
// namespace, a BuildConfig of a git repository whose Dockerfile records
// `uname -m`, pushed to repository (under the bed's registry), started as a
// user would and waited for until it ends. It returns the ended Build,
// whatever its phase, and its namespace.
func BuildHello(ctx context.Context, b *bed.Bed, dir, repository string) (*buildv1.Build, string, error) {
	ns, err := b.CreateNamespace(ctx, "build")
	if err != nil {
		return nil, "", err
	}
	uri, err := GitRepo(filepath.Join(dir, "repo"), map[string]string{
		"Dockerfile": "FROM " + b.BaseImage + "\nRUN uname -m > /machine\n",
	})
	if err != nil {
		return nil, "", err
	}
	bc := &buildv1.BuildConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"}}
	bc.Spec.Source = buildv1.BuildSource{Type: buildv1.BuildSourceGit, Git: &buildv1.GitBuildSource{URI: uri, Ref: "main"}}
	bc.Spec.Strategy = buildv1.BuildStrategy{Type: buildv1.DockerBuildStrategyType, DockerStrategy: &buildv1.DockerBuildStrategy{}}
	bc.Spec.Output.To = &corev1.ObjectReference{Kind: "DockerImage", Name: b.Registry.Host + "/" + repository + ":v1"}
	bc.Spec.Platforms = Platforms
	if err := b.Client.Create(ctx, bc); err != nil {
		return nil, "", err
	}
	started, err := StartBuild(ctx, b.Client, bc)
	if err != nil {
		return nil, "", err
	}
	done := &buildv1.Build{}
	err = bed.WaitFor(ctx, b.Client, client.ObjectKeyFromObject(started), done, func(b *buildv1.Build) bool {
		return b.Status.Phase.IsTerminal()
	})
	return done, ns, err
}
