package custom

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// logStreams copies pods' logs, each line prefixed, to one writer.
type logStreams struct {
	kube kubernetes.Interface
	ns   string

	mu      sync.Mutex // guards out and started
	out     io.Writer
	started map[string]bool
	wg      sync.WaitGroup
}

func newLogStreams(kube kubernetes.Interface, ns string, out io.Writer) *logStreams {
	return &logStreams{kube: kube, ns: ns, out: out, started: map[string]bool{}}
}

// follow starts copying the log of pod's first container, once, when that
// container has started (its log exists).
func (l *logStreams) follow(ctx context.Context, pod *corev1.Pod, prefix string) {
	if pod == nil || len(pod.Status.ContainerStatuses) == 0 {
		return
	}
	st := pod.Status.ContainerStatuses[0].State
	if st.Running == nil && st.Terminated == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started[pod.Name] {
		return
	}
	l.started[pod.Name] = true
	container := pod.Spec.Containers[0].Name
	l.wg.Go(func() {
		rc, err := l.kube.CoreV1().Pods(l.ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(ctx)
		if err != nil {
			l.line(prefix, fmt.Sprintf("(the log of pod %s cannot be read: %v)", pod.Name, err))
			return
		}
		defer rc.Close()
		sc := bufio.NewScanner(rc)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			l.line(prefix, sc.Text())
		}
	})
}

func (l *logStreams) line(prefix, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, "%s%s\n", prefix, text)
}

// wait waits up to d for the streams started to end (their pods ended).
func (l *logStreams) wait(d time.Duration) {
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}
