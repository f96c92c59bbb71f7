package plugin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// manifestListLabel is the prefix of the manifest-list pod's log lines.
const manifestListLabel = "manifest-list"

// buildPod is one pod of a build and what its log lines are prefixed with.
type buildPod struct {
	pod      corev1.Pod
	platform string // the platform, "manifest-list", or "" for a classic build's pod
}

// buildPods lists a build's pods (label openshift.io/build.name), platform
// pods first in platform order, then the manifest-list pod.
func buildPods(ctx context.Context, cs kubernetes.Interface, ns, name string) ([]buildPod, error) {
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: buildv1.PodSelector(name)})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of build %s: %w", name, err)
	}
	var out []buildPod
	for _, p := range list.Items {
		bp := buildPod{pod: p, platform: p.Annotations[buildv1.PlatformAnnotation]}
		if p.Labels[buildv1.PodRoleLabel] == buildv1.PodRoleManifestList {
			bp.platform = manifestListLabel
		}
		out = append(out, bp)
	}
	slices.SortFunc(out, func(a, b buildPod) int {
		ka, kb := a.platform == manifestListLabel, b.platform == manifestListLabel
		switch {
		case ka != kb && ka:
			return 1
		case ka != kb:
			return -1
		case a.platform < b.platform:
			return -1
		case a.platform > b.platform:
			return 1
		}
		return 0
	})
	return out, nil
}

func containerOf(p *corev1.Pod) string {
	if len(p.Spec.Containers) > 0 {
		return p.Spec.Containers[0].Name
	}
	return ""
}

// lineWriter writes whole lines from several streams without interleaving
// them.
type lineWriter struct {
	mu  sync.Mutex
	out io.Writer
}

func (w *lineWriter) line(prefix, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if prefix != "" {
		_, _ = fmt.Fprintf(w.out, "[%s] %s\n", prefix, text)
		return
	}
	_, _ = fmt.Fprintln(w.out, text)
}

func (w *lineWriter) block(text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = io.WriteString(w.out, text)
}

// streamLogs copies a pod's log to w, each line prefixed (when prefix is
// set).
func streamLogs(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, follow bool, prefix string, w *lineWriter) error {
	req := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: containerOf(p), Follow: follow})
	rc, err := req.Stream(ctx)
	if err != nil {
		return fmt.Errorf("logs of pod %s: %w", p.Name, err)
	}
	defer func() { _ = rc.Close() }()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		w.line(prefix, sc.Text())
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs of pod %s: %w", p.Name, err)
	}
	return nil
}

// podStarted says whether a pod has logs to read: it runs or has ended.
func podStarted(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
