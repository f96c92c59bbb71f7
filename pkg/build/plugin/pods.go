package plugin

import (
	"bufio"
	"context"
	"fmt"
	"slices"
	"strings"

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
	return sortBuildPods(list.Items), nil
}

// sortBuildPods names each pod's platform and orders them: platform pods
// in platform order, then the manifest-list pod.
func sortBuildPods(pods []corev1.Pod) []buildPod {
	var out []buildPod
	for _, p := range pods {
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
		case a.platform != b.platform:
			return strings.Compare(a.platform, b.platform)
		}
		return strings.Compare(a.pod.Name, b.pod.Name)
	})
	return out
}

func containerOf(p *corev1.Pod) string {
	if len(p.Spec.Containers) > 0 {
		return p.Spec.Containers[0].Name
	}
	return ""
}

// streamLogs copies a pod's log to w, each line prefixed (when prefix is
// set).
func streamLogs(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, opts *corev1.PodLogOptions, prefix string, w *lineWriter) error {
	opts = opts.DeepCopy()
	opts.Container = containerOf(p)
	rc, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, opts).Stream(ctx)
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
