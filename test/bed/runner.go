package bed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// RunnerOptions configure the bed's pod runner.
type RunnerOptions struct {
	// Images maps container image references to local binaries, e.g.
	// {"quay.io/archway/builder:latest": "/tmp/bin/builder"}. A key without
	// tag or digest matches every tag and digest of that repository.
	Images map[string]string
	// Env ("NAME=value") is added to every container's environment before
	// the pod's own variables, e.g. KUBECONFIG for programs that talk to
	// the bed's apiserver.
	Env []string
	// Dir holds one directory per pod (volumes, logs, termination
	// messages); empty means <bed dir>/pods.
	Dir string
	// Log receives one line per pod started and ended and per problem; nil
	// means the bed's log file pod-runner.log.
	Log io.Writer
	// InClusterConfig gives every pod what the ServiceAccount admission
	// plugin and a kubelet give it on a cluster (the bed's apiserver runs
	// without that plugin): unless the pod sets
	// automountServiceAccountToken: false or mounts something there itself,
	// /var/run/secrets/kubernetes.io/serviceaccount holds a token of the
	// pod's service account bound to the pod (TokenRequest), the
	// apiserver's CA (ca.crt) and the pod's namespace, and
	// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT name the
	// apiserver. A program using client-go's in-cluster configuration then
	// talks to the apiserver as the pod's service account.
	InClusterConfig bool
	// PodIPs gives each pod an address of its own as its status.podIP,
	// which the downward API passes on: a program that binds
	// $(POD_IP):port instead of :port shares no port with the other pods,
	// and the EndpointSlices of a Service selecting it lead to it (the
	// apiserver refuses loopback addresses there). The addresses come from
	// a /24 of 198.18.0.0/15 (reserved for benchmarks, never routed) that
	// the runner claims by adding it to the host's local routing table on
	// lo (`ip route add local 198.18.N.0/24 dev lo table local`: every
	// address of it is then this host's, as 127.0.0.0/8 is) and removes
	// when it stops; runners of concurrent beds claim different ones. The
	// processes still share the host's network (status.hostIP stays
	// 127.0.0.1).
	PodIPs bool
}

// Runner runs the pods bound to the bed's kwok nodes that kwok leaves alone
// (labelled ManualPodLabel or openshift.io/build.name) and whose every
// container image is one of RunnerOptions.Images: each container is a
// process on this machine. Pods without a mapped image stay with the test; a
// pod whose images are only partly mapped fails at once. The runner needs
// root (mount namespaces).
//
// Per container, the runner:
//   - runs the container's command and args; a command whose first word's
//     base name is the binary's or the image's (builder for
//     quay.io/archway/builder:v1), or no command at all, runs the image's
//     binary, any other command is looked up in PATH;
//   - gives it this process's environment (without KUBECONFIG, proxies and
//     ETCD_*/REGISTRY_* variables), then RunnerOptions.Env, then the
//     container's envFrom and env, with values from Secrets, ConfigMaps,
//     the downward API (fieldRef, resourceFieldRef) and $(VAR) references;
//   - materializes the pod's volumes (secret, configMap, downwardAPI,
//     projected with serviceAccountToken from the TokenRequest API, emptyDir,
//     hostPath) under the pod's directory and bind-mounts them, read-only
//     where a kubelet would, at their mountPaths (subPath and subPathExpr
//     included) in a mount namespace of the container's own, so the paths of
//     the pod spec hold and pods never see each other's files; the host's
//     mount table never changes. A mount point missing on the host is
//     created there, empty (e.g. /var/run/secrets/..., /dev/termination-log),
//     and left behind;
//   - mounts a file of the pod's directory at terminationMessagePath and
//     reads the termination message from it;
//   - starts in workingDir (created if missing), else in /;
//   - writes stdout and stderr to a log file in the CRI format kubelets use,
//     served to `kubectl logs` through the nodes' kubelet endpoint.
//
// A pod with hostUsers: false runs as a kubelet runs it: each container
// process in a new user namespace whose ids 0-65535 map to a host range of
// its own (from 1048576 up), so its root is an unprivileged user on the host
// with, inside its namespaces only, the capabilities a runtime would give
// it (containerd's defaults, less securityContext.capabilities.drop, plus
// add; set with setpriv). The runner refuses (pod
// Failed, reason UserNamespaceNotAllowed) hostUsers: false with a privileged
// container or the host's network, PID or IPC namespace. Because such a
// process resolves paths as no one on the host, the runner makes its
// directory, the mount points and their parents searchable by others, links
// the image's binary into its directory, and gives the pod's root its
// emptyDirs and a HOME of its own (what an image's root file system and a
// runtime's idmapped mounts provide on a node).
//
// Init containers run first, one after the other; the containers then run
// together. Containers are never restarted (every restartPolicy acts as
// Never), and resource requests and limits, security contexts other than
// hostUsers and readOnlyRootFilesystem (the host's / read-only in the
// container's mount namespace, its volumes on top writable as mounted)
// (seccomp, runAsUser; capabilities outside user namespaces), probes, lifecycle hooks and
// image pulls are not enforced or run: a container runs as the user running
// the bed (or the mapped root above), on the host's network (pod and host IP
// 127.0.0.1) and file system apart from its volumes.
//
// The runner reports status as a kubelet does, with merge patches: the
// start time and waiting containers when it takes the pod, running
// containers with their start times and the Ready conditions, then
// terminated containers with exit code, reason (Completed or Error) and
// message (the termination message, or the tail of the log with
// FallbackToLogsOnError), and phase Succeeded or Failed.
// activeDeadlineSeconds is enforced (reason DeadlineExceeded). Deleting a
// pod sends SIGTERM to each container's process group, SIGKILL after the
// grace period, and reports the pod terminal so kwok removes it.
//
// A pod runs at most once: a pod a runner has started containers of is
// never started again by another runner (after a restart, say); a new
// runner reports it Failed with reason RunnerRestarted.
type Runner struct {
	// Dir holds the pods' directories.
	Dir string

	bed      *Bed
	opts     RunnerOptions
	log      io.Writer
	logFile  *os.File
	ctx      context.Context
	cancel   context.CancelFunc
	informer cache.SharedIndexInformer
	wg       sync.WaitGroup

	mu      sync.Mutex
	pods    map[types.UID]*podRun
	handled map[types.UID]bool // pods reported without running them
	stopped bool
	idSlots map[int]bool // user-namespace id ranges in use

	imageMu sync.Mutex // one imageBinary at a time

	podNet string // this runner's pod subnet, 198.18.N. (PodIPs)
	nextIP uint32 // pod IPs handed out (PodIPs)
}

// StartPodRunner starts the pod runner. Only one runs at a time; stop it
// with Runner.Stop (Bed.Stop stops it too). The kubelet endpoint the nodes
// advertise serves the logs of the latest runner.
func (b *Bed) StartPodRunner(ctx context.Context, opts RunnerOptions) (*Runner, error) {
	if b.kubelet == nil {
		return nil, errors.New("bed: the pod runner needs the bed's nodes (Options.WithoutNodes is set)")
	}
	if cur := b.kubelet.runner.Load(); cur != nil && !cur.isStopped() {
		return nil, errors.New("bed: a pod runner is running already: stop it first")
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("bed: the pod runner needs root: it gives each container a mount namespace of its own")
	}
	if len(opts.Images) == 0 {
		return nil, errors.New("bed: RunnerOptions.Images maps no image to a binary")
	}
	for image, bin := range opts.Images {
		if st, err := os.Stat(bin); err != nil || st.IsDir() {
			return nil, fmt.Errorf("bed: the binary %q for image %s is not a file", bin, image)
		}
	}
	r := &Runner{
		Dir:     opts.Dir,
		bed:     b,
		opts:    opts,
		log:     opts.Log,
		pods:    map[types.UID]*podRun{},
		handled: map[types.UID]bool{},
	}
	if r.Dir == "" {
		r.Dir = filepath.Join(b.Dir, "pods")
	}
	if opts.PodIPs {
		var err error
		if r.podNet, err = claimPodSubnet(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return nil, err
	}
	if r.log == nil {
		f, err := os.OpenFile(b.LogPath("pod-runner"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		r.log, r.logFile = f, f
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(b.Clientset, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermNotEqualSelector("spec.nodeName", "").String()
		}))
	r.informer = factory.Core().V1().Pods().Informer()
	if _, err := r.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(obj) },
		UpdateFunc: func(_, obj any) { r.observe(obj) },
		DeleteFunc: r.forget,
	}); err != nil {
		r.cancel()
		return nil, err
	}
	factory.Start(r.ctx.Done())
	sctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), r.informer.HasSynced) {
		r.Stop()
		return nil, errors.New("bed: the pod runner's pod informer did not sync")
	}
	b.kubelet.runner.Store(r)
	b.Runner = r
	b.runners = append(b.runners, r)
	r.logf("pod runner started: images %s; pods in %s", strings.Join(sortedKeys(opts.Images), ", "), r.Dir)
	return r, nil
}

// Stop stops watching pods and kills every process the runner started
// (SIGKILL to each container's process group) without reporting their pods'
// status: a runner started later reports those pods Failed. It is safe to
// call more than once.
func (r *Runner) Stop() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	runs := make([]*podRun, 0, len(r.pods))
	for _, p := range r.pods {
		runs = append(runs, p)
	}
	r.mu.Unlock()
	r.cancel()
	for _, p := range runs {
		p.kill(false)
	}
	r.wg.Wait()
	if r.podNet != "" {
		releasePodSubnet(r.podNet)
	}
	r.logf("pod runner stopped")
	if r.logFile != nil {
		_ = r.logFile.Close()
	}
}

func (r *Runner) isStopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopped
}

func (r *Runner) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(r.log, "%s pod-runner: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// PodDir is the directory of a pod: volumes/<volume>, logs/<container>.log
// and termination/<container>.
func (r *Runner) PodDir(pod *corev1.Pod) string {
	return filepath.Join(r.Dir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// LogPath is the log file of one of the pod's containers, in the CRI format
// kubelets write ("<time> <stream> <F|P> <text>" per line).
func (r *Runner) LogPath(pod *corev1.Pod, container string) string {
	return filepath.Join(r.PodDir(pod), "logs", container+".log")
}

// ContainerLog returns the output of one of the pod's containers so far, as
// `kubectl logs` shows it.
func (r *Runner) ContainerLog(pod *corev1.Pod, container string) (string, error) {
	return readLogText(r.LogPath(pod, container))
}

// readLogText returns the text of a CRI log file.
func readLogText(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for line := range strings.SplitSeq(string(data), "\n") {
		if rec, ok := parseLogRecord(line); ok {
			b.WriteString(rec.text)
			if !rec.partial {
				b.WriteByte('\n')
			}
		}
	}
	return b.String(), nil
}

// logSource finds the log file of a container for the kubelet endpoint, and
// a channel closed when it is complete (nil when no container of this
// runner writes it).
func (r *Runner) logSource(ns, name, container string) (string, <-chan struct{}, error) {
	obj, exists, err := r.informer.GetStore().GetByKey(ns + "/" + name)
	if err != nil {
		return "", nil, err
	}
	var pod *corev1.Pod
	if exists {
		pod = obj.(*corev1.Pod)
	} else {
		// A pod that has gone: its newest directory, if any.
		dirs, _ := filepath.Glob(filepath.Join(r.Dir, ns+"_"+name+"_*"))
		if len(dirs) == 0 {
			return "", nil, fmt.Errorf("pod %s/%s not found", ns, name)
		}
		sort.Slice(dirs, func(i, j int) bool { return modTime(dirs[i]).Before(modTime(dirs[j])) })
		uid := strings.TrimPrefix(filepath.Base(dirs[len(dirs)-1]), ns+"_"+name+"_")
		pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
	}
	path := r.LogPath(pod, container)
	r.mu.Lock()
	run := r.pods[pod.UID]
	r.mu.Unlock()
	var done <-chan struct{}
	if run != nil {
		if c := run.container(container); c != nil {
			done = c.logsDone
		}
	}
	if _, err := os.Stat(path); err != nil {
		if exists && !slices.ContainsFunc(allContainers(pod), func(c corev1.Container) bool { return c.Name == container }) {
			return "", nil, fmt.Errorf("container %s is not valid for pod %s", container, name)
		}
		return "", nil, fmt.Errorf("container %q in pod %q is waiting to start", container, name)
	}
	return path, done, nil
}

func modTime(path string) time.Time {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

// observe decides what to do about a pod the informer reports.
func (r *Runner) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" || !runnerManaged(pod) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	if run := r.pods[pod.UID]; run != nil {
		if pod.DeletionTimestamp != nil {
			run.terminate(deletionGrace(pod), "", "")
		}
		return
	}
	if r.handled[pod.UID] || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return
	}
	mapped, unmapped := r.mapImages(pod)
	if len(mapped) == 0 {
		return
	}
	switch {
	case len(unmapped) > 0:
		r.handled[pod.UID] = true
		r.reportAsync(pod, "UnmappedImage", fmt.Sprintf(
			"the bed's pod runner has no binary for image(s) %s (RunnerOptions.Images)", strings.Join(unmapped, ", ")))
	case podStarted(pod):
		r.handled[pod.UID] = true
		r.reportAsync(pod, "RunnerRestarted",
			"the bed's pod runner restarted while this pod ran: its processes are gone and the bed never runs a pod twice")
	case pod.DeletionTimestamp != nil:
		r.handled[pod.UID] = true
		r.reportAsync(pod, "Deleted", "the pod was deleted before it started")
	case userNSError(pod) != nil:
		r.handled[pod.UID] = true
		r.reportAsync(pod, reasonUserNamespace, userNSError(pod).Error())
	default:
		run := newPodRun(r, pod.DeepCopy())
		r.pods[pod.UID] = run
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			run.run(mapped)
			r.mu.Lock()
			delete(r.pods, pod.UID)
			r.handled[pod.UID] = true
			r.mu.Unlock()
		}()
	}
}

// forget kills the processes of a pod removed from the apiserver without a
// terminal status (a forced deletion).
func (r *Runner) forget(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	run := r.pods[pod.UID]
	r.mu.Unlock()
	if run != nil {
		run.kill(false)
	}
}

// reportAsync ends a pod the runner does not run with a Failed status.
func (r *Runner) reportAsync(pod *corev1.Pod, reason, message string) {
	pod = pod.DeepCopy()
	r.logf("pod %s/%s: Failed without running: %s: %s", pod.Namespace, pod.Name, reason, message)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		status := failedStatus(pod, reason, message)
		if err := r.patchStatus(r.ctx, pod, status, ""); err != nil {
			r.logf("pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
	}()
}

// runnerManaged reports whether kwok leaves the pod alone (see
// kwok/stages.yaml).
func runnerManaged(pod *corev1.Pod) bool {
	_, manual := pod.Labels[ManualPodLabel]
	_, build := pod.Labels["openshift.io/build.name"]
	return manual || build
}

// mapImages returns the binary of each container (init ones included) by
// container name, and the images no binary is configured for.
func (r *Runner) mapImages(pod *corev1.Pod) (map[string]string, []string) {
	mapped := map[string]string{}
	var unmapped []string
	for _, c := range allContainers(pod) {
		if bin := r.binaryFor(c.Image); bin != "" {
			mapped[c.Name] = bin
		} else if !slices.Contains(unmapped, c.Image) {
			unmapped = append(unmapped, c.Image)
		}
	}
	return mapped, unmapped
}

func (r *Runner) binaryFor(image string) string {
	if bin, ok := r.opts.Images[image]; ok {
		return bin
	}
	return r.opts.Images[imageRepository(image)]
}

// imageRepository strips the tag and digest from an image reference.
func imageRepository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

func allContainers(pod *corev1.Pod) []corev1.Container {
	return append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...)
}

// podStarted reports whether any container of the pod has been started.
func podStarted(pod *corev1.Pod) bool {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Running != nil || cs.State.Terminated != nil {
				return true
			}
		}
	}
	return false
}

func deletionGrace(pod *corev1.Pod) time.Duration {
	if s := pod.DeletionGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return terminationGrace(pod)
}

func terminationGrace(pod *corev1.Pod) time.Duration {
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return 30 * time.Second
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// claimPodSubnet makes the first free /24 of 198.18.0.0/16 this host's
// (a local route on lo, which only one claimant can add) and returns its
// prefix "198.18.N.".
func claimPodSubnet() (string, error) {
	var last []byte
	for n := range 256 {
		subnet := fmt.Sprintf("198.18.%d.0/24", n)
		out, err := exec.Command("ip", "route", "add", "local", subnet, "dev", "lo", "table", "local").CombinedOutput()
		if err == nil {
			return fmt.Sprintf("198.18.%d.", n), nil
		}
		if !strings.Contains(string(out), "File exists") {
			return "", fmt.Errorf("bed: claiming pod addresses %s: %w: %s", subnet, err, out)
		}
		last = out
	}
	return "", fmt.Errorf("bed: every /24 of 198.18.0.0/16 is claimed for pod addresses: %s", last)
}

// releasePodSubnet removes the route claimPodSubnet added.
func releasePodSubnet(prefix string) {
	_ = exec.Command("ip", "route", "del", "local", prefix+"0/24", "dev", "lo", "table", "local").Run()
}
