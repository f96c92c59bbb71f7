// Package execformat is placement's exec-format-error monitor: it reports
// containers that could not start because their entrypoint is a program for
// another architecture than their node's (the kernel's ENOEXEC, "exec format
// error"), which happens when an image says it supports an architecture it
// has no binaries for, so placement's choice was wrong.
//
// It watches pods' status, with no kernel hooks and no cache of pods (one
// watch of the cluster's pods, resumed from its resource version; memory
// stays flat in the number of pods). A container counts when it terminated
// after an exec format error:
//   - its termination message says "exec format error" (runtimes that fail
//     the container at start, and containers whose message comes from their
//     log, terminationMessagePolicy FallbackToLogsOnError);
//   - or it ended with exit code 255, runc's code for an entrypoint it could
//     not execute, and the last lines of its log say so (runc writes the
//     error to the container's stderr and leaves no message).
//
// Not covered: an exec format error inside a running container (a script
// calling a foreign binary) that the container survives or reports
// otherwise, which only a kernel-level monitor sees.
//
// For each such container it records, once, a Warning event on the pod with
// reason ExecFormatError and archway_placement_exec_format_errors_total
// {architecture=<the node's>}. It runs while the ClusterPodPlacementConfig
// enables spec.plugins.execFormatErrorMonitor.
package execformat

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// EventReason is the reason of the event on a pod whose container failed
// with an exec format error.
const EventReason = "ExecFormatError"

// runcExecFailed is runc's exit code for an entrypoint it could not execute.
const runcExecFailed = 255

// logTailBytes is how much of a container's log is read to look for the
// error: runc's line is the last one.
const logTailBytes = 2048

// Monitor watches pods for containers that failed with an exec format
// error. Start it with a manager (it is a manager.Runnable that needs
// leader election).
type Monitor struct {
	pods     kubernetes.Interface
	configs  client.Reader
	recorder events.EventRecorder
	errors   *prometheus.CounterVec
	log      logr.Logger
	// seen holds the containers already reported (runtime container IDs).
	seen *lru.Cache
	// poll is how often the monitor rereads whether the
	// ClusterPodPlacementConfig enables it.
	poll time.Duration
}

// New returns a monitor that reads pods and logs with cs, the
// ClusterPodPlacementConfig with configs, and records with recorder;
// its counter is registered with reg.
func New(cs kubernetes.Interface, configs client.Reader, recorder events.EventRecorder, reg prometheus.Registerer, log logr.Logger) (*Monitor, error) {
	m := &Monitor{
		pods:     cs,
		configs:  configs,
		recorder: recorder,
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archway_placement_exec_format_errors_total",
			Help: "Containers that could not start because their entrypoint is for another architecture than their node's (exec format error), by the node's architecture.",
		}, []string{"architecture"}),
		log:  log,
		seen: lru.New(4096),
		poll: 10 * time.Second,
	}
	if err := reg.Register(m.errors); err != nil {
		return nil, err
	}
	return m, nil
}

// NeedLeaderElection makes only the leader watch.
func (m *Monitor) NeedLeaderElection() bool { return true }

// Start watches while the ClusterPodPlacementConfig enables the monitor,
// until ctx ends.
func (m *Monitor) Start(ctx context.Context) error {
	var w *watcher
	defer func() { w.stop() }()
	tick := time.NewTicker(m.poll)
	defer tick.Stop()
	for {
		enabled := m.enabled(ctx)
		switch {
		case enabled && w == nil:
			w = m.startWatch(ctx)
			m.log.Info("exec-format-error monitor started")
		case !enabled && w != nil:
			w.stop()
			w = nil
			m.log.Info("exec-format-error monitor stopped")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// watcher is a running watch of pods.
type watcher struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (m *Monitor) startWatch(ctx context.Context) *watcher {
	wctx, cancel := context.WithCancel(ctx)
	w := &watcher{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		m.watch(wctx)
	}()
	return w
}

// stop ends the watch and waits for it; a nil watcher is stopped.
func (w *watcher) stop() {
	if w == nil {
		return
	}
	w.cancel()
	<-w.done
}

func (m *Monitor) enabled(ctx context.Context) bool {
	var cfg multiarchv1beta1.ClusterPodPlacementConfig
	if err := m.configs.Get(ctx, client.ObjectKey{Name: multiarchv1beta1.ClusterPodPlacementConfigName}, &cfg); err != nil {
		return false
	}
	p := cfg.Spec.Plugins
	return cfg.DeletionTimestamp == nil && p != nil && p.ExecFormatErrorMonitor != nil && p.ExecFormatErrorMonitor.Enabled
}

// watch follows every pod's changes from now on, listing again (one item,
// for a resource version) whenever the watch cannot resume.
func (m *Monitor) watch(ctx context.Context) {
	for ctx.Err() == nil {
		list, err := m.pods.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			m.log.Error(err, "listing pods to start watching")
			if !sleep(ctx, 5*time.Second) {
				return
			}
			continue
		}
		rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return m.pods.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
			},
		})
		if err != nil {
			m.log.Error(err, "watching pods")
			return
		}
		for ev := range rw.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && (ev.Type == watch.Modified || ev.Type == watch.Added) {
				m.check(ctx, pod)
			}
		}
		rw.Stop()
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// check reports each of the pod's containers that ended with an exec
// format error and was not reported yet.
func (m *Monitor) check(ctx context.Context, pod *corev1.Pod) {
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			for _, t := range []struct {
				term     *corev1.ContainerStateTerminated
				previous bool
			}{{cs.State.Terminated, false}, {cs.LastTerminationState.Terminated, true}} {
				if t.term == nil {
					continue
				}
				// The runtime's container ID; a kubelet that reports none
				// (a simulated one) is keyed by pod, container and run.
				key := t.term.ContainerID
				if key == "" {
					key = fmt.Sprintf("%s/%s/%d/%t", pod.UID, cs.Name, cs.RestartCount, t.previous)
				}
				if _, done := m.seen.Get(key); done {
					continue
				}
				failed, err := m.execFormatError(ctx, pod, cs.Name, t.term, t.previous)
				// A log read right after the container ended can fail
				// (the kubelet busy, a network blip) and a terminated
				// container may never change again: retry a few times.
				for backoff := 500 * time.Millisecond; err != nil && backoff <= 4*time.Second; backoff *= 2 {
					if !sleep(ctx, backoff) {
						return
					}
					failed, err = m.execFormatError(ctx, pod, cs.Name, t.term, t.previous)
				}
				if err != nil {
					m.log.Info("could not read a container's log to look for an exec format error", "pod", client.ObjectKeyFromObject(pod), "container", cs.Name, "error", err.Error())
					continue
				}
				m.seen.Add(key, struct{}{})
				if failed {
					m.report(ctx, pod, cs.Name)
				}
			}
		}
	}
}

// execFormatError tells from the termination message, or for runc's exit
// code from the tail of the container's log, whether the container failed
// to execute its entrypoint for an exec format error.
func (m *Monitor) execFormatError(ctx context.Context, pod *corev1.Pod, container string, t *corev1.ContainerStateTerminated, previous bool) (bool, error) {
	if strings.Contains(t.Message, "exec format error") {
		return true, nil
	}
	if t.ExitCode != runcExecFailed {
		return false, nil
	}
	rc, err := m.pods.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
		Container:  container,
		Previous:   previous,
		TailLines:  ptrTo(int64(3)),
		LimitBytes: ptrTo(int64(logTailBytes)),
	}).Stream(ctx)
	if err != nil {
		return false, err
	}
	defer rc.Close()
	tail, err := io.ReadAll(io.LimitReader(rc, logTailBytes))
	if err != nil {
		return false, err
	}
	return strings.Contains(string(tail), "exec format error"), nil
}

func ptrTo[T any](v T) *T { return &v }

// report records the event and counts the error under the node's
// architecture.
func (m *Monitor) report(ctx context.Context, pod *corev1.Pod, container string) {
	arch := "unknown"
	if pod.Spec.NodeName != "" {
		if node, err := m.pods.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{}); err == nil && node.Labels[corev1.LabelArchStable] != "" {
			arch = node.Labels[corev1.LabelArchStable]
		}
	}
	m.errors.WithLabelValues(arch).Inc()
	m.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventReason, "Monitor",
		"container %s could not start on node %s (%s): exec format error: its image's entrypoint is a program for another architecture; the image claims %s but carries no binary for it",
		container, pod.Spec.NodeName, arch, arch)
	m.log.Info("container failed with an exec format error", "pod", client.ObjectKeyFromObject(pod), "container", container, "node", pod.Spec.NodeName, "architecture", arch)
}
