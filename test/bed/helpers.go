package bed

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// CreateNamespace creates a namespace with a generated name starting with
// prefix and returns its name.
func (b *Bed) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := b.Client.Create(ctx, ns); err != nil {
		return "", err
	}
	return ns.Name, nil
}

// CreateAndWait creates obj and waits until c (which may read from a cache)
// can get it, so a test does not race its own informers.
func CreateAndWait(ctx context.Context, c client.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil {
		return err
	}
	key := client.ObjectKeyFromObject(obj)
	return WaitFor(ctx, c, key, obj.DeepCopyObject().(client.Object), func(client.Object) bool { return true })
}

// WaitFor polls the object at key into obj until done(obj) is true, up to
// DefaultTimeout (or ctx's deadline). The error of a timeout shows the
// object's last state.
func WaitFor[T client.Object](ctx context.Context, c client.Client, key client.ObjectKey, obj T, done func(T) bool) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, Interval, true, func(ctx context.Context) (bool, error) {
		if lastErr = c.Get(ctx, key, obj); lastErr != nil {
			return false, nil
		}
		return done(obj), nil
	})
	if err != nil {
		if lastErr != nil {
			return fmt.Errorf("waiting for %T %s: %w", obj, key, lastErr)
		}
		state, _ := json.MarshalIndent(obj, "", "  ")
		return fmt.Errorf("waiting for %T %s: condition not met in time; last state:\n%s", obj, key, state)
	}
	return nil
}

// WaitGone waits until the object at key no longer exists.
func WaitGone(ctx context.Context, c client.Client, key client.ObjectKey, obj client.Object) error {
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, Interval, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, obj)
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %T %s to be deleted: %w", obj, key, err)
	}
	return nil
}

// WaitPodBound waits until the scheduler has bound the pod and returns the
// node's name.
func (b *Bed) WaitPodBound(ctx context.Context, namespace, name string) (string, error) {
	pod := &corev1.Pod{}
	err := WaitFor(ctx, b.Client, types.NamespacedName{Namespace: namespace, Name: name}, pod, func(p *corev1.Pod) bool {
		return p.Spec.NodeName != ""
	})
	return pod.Spec.NodeName, err
}

// SetPodRunning reports a bound pod's containers as running, as a kubelet
// would. Use it for pods kwok leaves alone (ManualPodLabel, build pods).
func (b *Bed) SetPodRunning(ctx context.Context, pod *corev1.Pod) error {
	now := metav1.Now()
	status := corev1.PodStatus{
		Phase:     corev1.PodRunning,
		StartTime: &now,
		HostIP:    "127.0.0.1",
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	for _, c := range pod.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return b.patchPodStatus(ctx, pod, status)
}

// SetPodFinished ends a pod as a kubelet would: every container terminated
// with exitCode (reason Completed for 0, else Error, or reason if set) and
// message as the termination message; phase Succeeded for exit code 0, else
// Failed.
func (b *Bed) SetPodFinished(ctx context.Context, pod *corev1.Pod, exitCode int32, reason, message string) error {
	now := metav1.Now()
	phase := corev1.PodSucceeded
	if exitCode != 0 {
		phase = corev1.PodFailed
	}
	if reason == "" {
		reason = "Completed"
		if exitCode != 0 {
			reason = "Error"
		}
	}
	start := now
	if pod.Status.StartTime != nil {
		start = *pod.Status.StartTime
	}
	status := corev1.PodStatus{
		Phase:     phase,
		StartTime: &start,
		HostIP:    "127.0.0.1",
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: now},
		},
	}
	for _, c := range pod.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exitCode, Reason: reason, Message: message, StartedAt: start, FinishedAt: now,
			}},
		})
	}
	return b.patchPodStatus(ctx, pod, status)
}

// patchPodStatus replaces the pod's status with a merge patch. Container
// states are one-of fields, so each state is sent whole and the other states
// are cleared explicitly with null.
func (b *Bed) patchPodStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) error {
	statuses := make([]map[string]any, 0, len(status.ContainerStatuses))
	for _, cs := range status.ContainerStatuses {
		raw, err := json.Marshal(cs)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		state := m["state"].(map[string]any)
		for _, k := range []string{"waiting", "running", "terminated"} {
			if _, ok := state[k]; !ok {
				state[k] = nil
			}
		}
		statuses = append(statuses, m)
	}
	raw, err := json.Marshal(status)
	if err != nil {
		return err
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		return err
	}
	body["containerStatuses"] = statuses
	patch, err := json.Marshal(map[string]any{"status": body})
	if err != nil {
		return err
	}
	_, err = b.Clientset.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("bed: reporting status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultTimeout)
}

// SetTestLogger makes controller-runtime's logger log errors only, to
// stderr, unless ARCHWAY_TEST_VERBOSE is set (then everything): the suites'
// controllers and webhooks stay quiet unless asked.
func SetTestLogger() {
	level := zapcore.ErrorLevel
	if os.Getenv("ARCHWAY_TEST_VERBOSE") != "" {
		level = zapcore.Level(-2)
	}
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(level)))
}

// PodKubeconfig returns a copy of the bed's kubeconfig for the pods the pod
// runner runs, which reach the apiserver with it (the runner has no
// in-cluster network). Pods in user namespaces read it as no one on the
// host: the copy is readable by all, in a directory all can search (the
// bed's machine has no other users to hide it from).
func (b *Bed) PodKubeconfig() (string, error) {
	data, err := os.ReadFile(b.Kubeconfig)
	if err != nil {
		return "", err
	}
	dst := b.Kubeconfig + "-pods"
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		return "", err
	}
	return dst, SearchableByOthers(filepath.Dir(dst))
}
