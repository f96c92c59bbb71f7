package bed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// podIP is the IP of the node and, unless RunnerOptions.PodIPs, of every
// pod the runner runs: its processes use the host's network.
const podIP = "127.0.0.1"

// Kubelet-like reasons and messages of the runner's statuses.
const (
	reasonCompleted       = "Completed"
	reasonError           = "Error"
	reasonStartError      = "StartError"
	reasonConfigError     = "CreateContainerConfigError"
	reasonStatusUnknown   = "ContainerStatusUnknown"
	reasonDeadline        = "DeadlineExceeded"
	messageDeadline       = "Pod was active on the node longer than the specified deadline"
	maxTerminationMessage = 4096
	fallbackLogLines      = 80
	fallbackLogBytes      = 2048
)

// podRun is one pod the runner runs, from taking it to its terminal status.
type podRun struct {
	r   *Runner
	pod *corev1.Pod // as first seen; the spec never changes
	dir string
	ip  string // status.podIP

	mu         sync.Mutex
	status     corev1.PodStatus
	containers map[string]*containerRun
	volumes    map[string]podVolume // materialized, once

	patchMu sync.Mutex // status patches go out one at a time, in order

	terminateOnce sync.Once
	terminateCh   chan struct{} // closed when the pod must end gracefully
	grace         time.Duration
	podReason     string
	podMessage    string

	killOnce sync.Once
	killCh   chan struct{} // closed when processes must die now
	silent   bool          // report nothing: the runner stops or the pod is gone
}

func newPodRun(r *Runner, pod *corev1.Pod) *podRun {
	return &podRun{
		r:           r,
		pod:         pod,
		dir:         r.PodDir(pod),
		ip:          r.podIP(),
		containers:  map[string]*containerRun{},
		terminateCh: make(chan struct{}),
		killCh:      make(chan struct{}),
	}
}

// podIP is the next pod's IP: the node's, or with RunnerOptions.PodIPs an
// address of its own (reused after 254 pods).
func (r *Runner) podIP() string {
	if !r.opts.PodIPs {
		return podIP
	}
	n := atomic.AddUint32(&r.nextIP, 1)
	return fmt.Sprintf("%s%d", r.podNet, (n-1)%254+1)
}

// terminate asks the pod's processes to end: SIGTERM, then SIGKILL after
// grace. reason and message, if set, become the pod's.
func (p *podRun) terminate(grace time.Duration, reason, message string) {
	p.terminateOnce.Do(func() {
		p.mu.Lock()
		p.grace, p.podReason, p.podMessage = grace, reason, message
		p.mu.Unlock()
		close(p.terminateCh)
	})
	if grace <= 0 {
		p.kill(true)
	}
}

// kill ends the pod's processes with SIGKILL at once; without report, the
// pod's status is left as it is.
func (p *podRun) kill(report bool) {
	p.mu.Lock()
	if !report {
		p.silent = true
	}
	p.mu.Unlock()
	p.killOnce.Do(func() { close(p.killCh) })
}

func (p *podRun) interrupted() bool {
	select {
	case <-p.terminateCh:
		return true
	case <-p.killCh:
		return true
	default:
		return false
	}
}

func (p *podRun) isSilent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.silent
}

func (p *podRun) container(name string) *containerRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.containers[name]
}

func (p *podRun) logf(format string, args ...any) {
	p.r.logf("pod %s/%s: %s", p.pod.Namespace, p.pod.Name, fmt.Sprintf(format, args...))
}

// run takes the pod, runs its init containers one by one and then its
// containers together, and reports its end.
func (p *podRun) run(binaries map[string]string) {
	ctx := p.r.ctx
	if err := os.MkdirAll(filepath.Join(p.dir, "logs"), 0o755); err != nil {
		p.logf("%v", err)
		return
	}
	taken, err := p.claim(ctx)
	if err != nil || !taken {
		if err != nil && ctx.Err() == nil {
			p.logf("not run: %v", err)
		}
		return
	}
	p.logf("started on node %s", p.pod.Spec.NodeName)
	if s := p.pod.Spec.ActiveDeadlineSeconds; s != nil {
		deadline := time.AfterFunc(time.Duration(*s)*time.Second, func() {
			p.terminate(terminationGrace(p.pod), reasonDeadline, messageDeadline)
		})
		defer deadline.Stop()
	}
	initFailed := false
	for _, c := range p.pod.Spec.InitContainers {
		if p.interrupted() {
			break
		}
		if !p.runContainer(ctx, c, binaries[c.Name], true) {
			initFailed = !p.interrupted()
			break
		}
	}
	if !initFailed && !p.interrupted() {
		var wg sync.WaitGroup
		for _, c := range p.pod.Spec.Containers {
			wg.Go(func() { p.runContainer(ctx, c, binaries[c.Name], false) })
		}
		wg.Wait()
	}
	if p.isSilent() {
		p.logf("stopped without a status report")
		return
	}
	p.mu.Lock()
	p.finishStatus(initFailed)
	phase := p.status.Phase
	p.mu.Unlock()
	if err := p.report(ctx); err != nil {
		p.logf("%v", err)
	}
	p.logf("ended: %s", phase)
}

// claim reports the pod taken (start time, waiting containers) if it still
// has not started, with the resource version as precondition, so a pod is
// taken once.
func (p *podRun) claim(ctx context.Context) (bool, error) {
	pod := p.pod
	for range 5 {
		switch {
		case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, podStarted(pod):
			return false, nil
		case pod.DeletionTimestamp != nil:
			p.mu.Lock()
			p.status = failedStatus(pod, "Deleted", "the pod was deleted before it started")
			p.mu.Unlock()
			return false, p.report(ctx)
		}
		p.mu.Lock()
		p.initialStatus(pod)
		status := p.status.DeepCopy()
		p.mu.Unlock()
		err := p.r.patchStatus(ctx, pod, *status, pod.ResourceVersion)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			return false, err
		}
		if pod, err = p.r.bed.Clientset.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		if pod.UID != p.pod.UID {
			return false, nil
		}
	}
	return false, errors.New("the pod kept changing while the runner took it")
}

// initialStatus is the status of a pod just taken: Pending, every
// container waiting.
func (p *podRun) initialStatus(pod *corev1.Pod) {
	now := metav1.Now()
	s := corev1.PodStatus{
		Phase:      corev1.PodPending,
		Conditions: slices.Clone(pod.Status.Conditions),
		HostIP:     podIP,
		HostIPs:    []corev1.HostIP{{IP: podIP}},
		PodIP:      p.ip,
		PodIPs:     []corev1.PodIP{{IP: p.ip}},
		StartTime:  &now,
		QOSClass:   pod.Status.QOSClass,
	}
	for i, c := range pod.Spec.InitContainers {
		reason := "PodInitializing"
		if i == 0 {
			reason = "ContainerCreating"
		}
		s.InitContainerStatuses = append(s.InitContainerStatuses, waitingStatus(c, reason, ""))
	}
	reason := "ContainerCreating"
	if len(pod.Spec.InitContainers) > 0 {
		reason = "PodInitializing"
	}
	for _, c := range pod.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, waitingStatus(c, reason, ""))
	}
	p.status = s
	p.updateConditions(false)
}

func waitingStatus(c corev1.Container, reason, message string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name: c.Name, Image: c.Image, Started: ptr.To(false),
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}},
	}
}

// containerStatus returns the status entry of a container; p.mu is held.
func (p *podRun) containerStatus(name string, init bool) *corev1.ContainerStatus {
	list := p.status.ContainerStatuses
	if init {
		list = p.status.InitContainerStatuses
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// updateConditions sets the pod's conditions from its container statuses,
// keeping the transition time of a condition that does not change; p.mu is
// held.
func (p *podRun) updateConditions(terminal bool) {
	var notInit, notReady []string
	for _, cs := range p.status.InitContainerStatuses {
		if t := cs.State.Terminated; t == nil || t.ExitCode != 0 {
			notInit = append(notInit, cs.Name)
		}
	}
	for _, cs := range p.status.ContainerStatuses {
		if cs.State.Running == nil {
			notReady = append(notReady, cs.Name)
		}
	}
	set := func(typ corev1.PodConditionType, ok bool, reason, message string) {
		status := corev1.ConditionFalse
		if ok {
			status, reason, message = corev1.ConditionTrue, "", ""
		}
		c := corev1.PodCondition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}
		for i := range p.status.Conditions {
			if old := &p.status.Conditions[i]; old.Type == typ {
				if old.Status == status {
					c.LastTransitionTime = old.LastTransitionTime
				}
				*old = c
				return
			}
		}
		p.status.Conditions = append(p.status.Conditions, c)
	}
	set(corev1.PodScheduled, true, "", "")
	set(corev1.PodReadyToStartContainers, !terminal, "", "")
	set(corev1.PodInitialized, len(notInit) == 0, "ContainersNotInitialized",
		fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(notInit, " ")))
	reason, message := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " "))
	if terminal {
		reason, message = "PodCompleted", ""
	}
	set(corev1.ContainersReady, len(notReady) == 0, reason, message)
	set(corev1.PodReady, len(notReady) == 0, reason, message)
}

// setContainer changes a container's status and the pod's phase and
// conditions to match; p.mu is held.
func (p *podRun) setContainer(name string, init bool, change func(*corev1.ContainerStatus)) {
	if cs := p.containerStatus(name, init); cs != nil {
		change(cs)
	}
	if !init && p.status.Phase == corev1.PodPending {
		for _, cs := range p.status.ContainerStatuses {
			if cs.State.Running != nil || cs.State.Terminated != nil {
				p.status.Phase = corev1.PodRunning
			}
		}
	}
	p.updateConditions(false)
}

// finishStatus ends the pod's status: phase Succeeded when every container
// exited 0 (and no deadline passed), else Failed; containers that never ran
// are terminated with reason ContainerStatusUnknown, except those a failed
// init container kept waiting; p.mu is held.
func (p *podRun) finishStatus(initFailed bool) {
	ok := true
	end := func(list []corev1.ContainerStatus, keepWaiting bool) {
		for i := range list {
			cs := &list[i]
			if t := cs.State.Terminated; t != nil {
				ok = ok && t.ExitCode == 0
				continue
			}
			ok = false
			if keepWaiting {
				continue
			}
			cs.Ready, cs.Started = false, ptr.To(false)
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: reasonStatusUnknown, Message: "the pod ended before the container started",
				FinishedAt: metav1.Now(),
			}}
		}
	}
	end(p.status.InitContainerStatuses, false)
	end(p.status.ContainerStatuses, initFailed)
	p.status.Phase = corev1.PodFailed
	if ok && p.podReason == "" {
		p.status.Phase = corev1.PodSucceeded
	}
	p.status.Reason, p.status.Message = p.podReason, p.podMessage
	p.updateConditions(true)
}

// report sends the pod's current status, except a status whose every
// container ended while the pod has no phase of its end yet: the pod's end,
// written next, carries them, in one status write, as a kubelet's status
// sync does.
func (p *podRun) report(ctx context.Context) error {
	p.patchMu.Lock()
	defer p.patchMu.Unlock()
	p.mu.Lock()
	status := p.status.DeepCopy()
	p.mu.Unlock()
	ending := status.Phase != corev1.PodSucceeded && status.Phase != corev1.PodFailed &&
		len(status.ContainerStatuses) > 0 && !slices.ContainsFunc(status.ContainerStatuses, func(cs corev1.ContainerStatus) bool {
		return cs.State.Terminated == nil
	})
	if ending {
		return nil
	}
	err := p.r.patchStatus(ctx, p.pod, *status, "")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// failedStatus ends a pod the runner does not run (any more): containers
// that did not end are terminated with reason ContainerStatusUnknown, and
// the pod is Failed with reason and message.
func failedStatus(pod *corev1.Pod, reason, message string) corev1.PodStatus {
	now := metav1.Now()
	s := *pod.Status.DeepCopy()
	s.Phase, s.Reason, s.Message = corev1.PodFailed, reason, message
	if s.StartTime == nil {
		s.StartTime = &now
	}
	end := func(containers []corev1.Container, old []corev1.ContainerStatus) []corev1.ContainerStatus {
		var out []corev1.ContainerStatus
		for _, c := range containers {
			cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image}
			if i := slices.IndexFunc(old, func(o corev1.ContainerStatus) bool { return o.Name == c.Name }); i >= 0 {
				cs = old[i]
			}
			if cs.State.Terminated == nil {
				t := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: reasonStatusUnknown, Message: message, FinishedAt: now}
				if r := cs.State.Running; r != nil {
					t.StartedAt = r.StartedAt
				}
				cs.State = corev1.ContainerState{Terminated: t}
			}
			cs.Ready, cs.Started = false, ptr.To(false)
			out = append(out, cs)
		}
		return out
	}
	s.InitContainerStatuses = end(pod.Spec.InitContainers, s.InitContainerStatuses)
	s.ContainerStatuses = end(pod.Spec.Containers, s.ContainerStatuses)
	run := &podRun{status: s}
	run.updateConditions(true)
	return run.status
}

// patchStatus replaces the pod's status with a merge patch (lists are
// replaced whole, so a container's old state goes). A resourceVersion makes
// the patch conditional.
func (r *Runner) patchStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus, resourceVersion string) error {
	body := map[string]any{"status": status}
	if status.Reason == "" {
		// Clear a reason of an earlier status; a message goes with it.
		body["status"] = statusWithNulls(status)
	}
	if resourceVersion != "" {
		body["metadata"] = map[string]any{"resourceVersion": resourceVersion}
	}
	patch, err := json.Marshal(body)
	if err != nil {
		return err
	}
	_, err = r.bed.Clientset.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("reporting the status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func statusWithNulls(status corev1.PodStatus) map[string]any {
	raw, _ := json.Marshal(status)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	m["reason"], m["message"] = nil, nil
	return m
}
