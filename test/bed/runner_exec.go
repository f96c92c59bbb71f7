package bed

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// containerPrelude runs in the container's own mount namespace (the
// process starts with CLONE_NEWNS, and Go makes / recursively private in
// it, so nothing propagates to the host) before the container's command:
// it bind-mounts each "src dst" pair (creating a missing mount point),
// makes the listed targets read-only, changes to the working directory and
// execs the command. %[1]s, %[2]s and %[3]s are mount, mkdir and dirname;
// mount -n writes no utab.
const containerPrelude = `fail() { echo "bed pod runner: $*" >&2; exit 128; }
while [ "$1" != -- ]; do
	if [ -d "$1" ]; then %[2]s -p "$2"; else %[2]s -p "$(%[3]s "$2")" && { [ -e "$2" ] || : >"$2"; }; fi || fail "cannot create the mount point $2"
	%[1]s -n --bind "$1" "$2" || fail "cannot mount $1 at $2"
	shift 2
done
shift
while [ "$1" != -- ]; do
	%[1]s -n -o remount,bind,ro "$1" || fail "cannot make $1 read-only"
	shift
done
shift
{ %[2]s -p "$1" && cd "$1"; } || fail "cannot change to the working directory $1"
shift
exec "$@"
`

// preludeScript is containerPrelude with the host's tools, found once.
var preludeScript = sync.OnceValues(func() (string, error) {
	var paths []any
	for _, tool := range []string{"mount", "mkdir", "dirname"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			return "", fmt.Errorf("the bed's pod runner needs %s: %w", tool, err)
		}
		paths = append(paths, shellQuote(p))
	}
	return fmt.Sprintf(containerPrelude, paths...), nil
})

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// containerRun is a container the runner has started: its log file and a
// channel closed once the file holds all its output.
type containerRun struct {
	name     string
	logPath  string
	logsDone chan struct{}
}

// runContainer runs one container to its end and reports its states. It
// returns whether the container exited 0.
func (p *podRun) runContainer(ctx context.Context, c corev1.Container, binary string, init bool) bool {
	cfg, ok := p.waitConfig(ctx, c, binary, init)
	if !ok {
		return false
	}
	cr := &containerRun{
		name:     c.Name,
		logPath:  filepath.Join(p.dir, "logs", c.Name+".log"),
		logsDone: make(chan struct{}),
	}
	logFile, err := os.OpenFile(cr.logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return p.containerEnded(ctx, c.Name, init, startFailure(err))
	}
	p.mu.Lock()
	p.containers[c.Name] = cr
	p.mu.Unlock()

	// Running is reported before the process starts: a runner that stops
	// in between leaves a pod that looks started, which no runner runs
	// again.
	started := metav1.Now()
	p.mu.Lock()
	p.setContainer(c.Name, init, func(cs *corev1.ContainerStatus) {
		cs.Ready, cs.Started = !init, ptr.To(true)
		cs.ContainerID = "bed://" + string(p.pod.UID) + "/" + c.Name
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}
	})
	p.mu.Unlock()
	if err := p.report(ctx); err != nil || p.interrupted() {
		_ = logFile.Close()
		close(cr.logsDone)
		if err != nil && ctx.Err() == nil {
			p.logf("container %s not started: %v", c.Name, err)
		}
		return p.containerEnded(ctx, c.Name, init, &corev1.ContainerStateTerminated{
			ExitCode: 137, Reason: reasonStatusUnknown, Message: "the pod ended before the container started",
			StartedAt: started, FinishedAt: metav1.Now(),
		})
	}
	code, err := p.execute(cfg, binary, logFile, cr)
	if err != nil {
		p.logf("container %s: %v", c.Name, err)
		t := startFailure(err)
		t.StartedAt = started
		return p.containerEnded(ctx, c.Name, init, t)
	}
	t := &corev1.ContainerStateTerminated{
		ExitCode: int32(code), Reason: reasonCompleted, StartedAt: started, FinishedAt: metav1.Now(),
		ContainerID: "bed://" + string(p.pod.UID) + "/" + c.Name,
	}
	if code != 0 {
		t.Reason = reasonError
	}
	t.Message = p.terminationMessage(c, cr, code)
	p.logf("container %s exited %d", c.Name, code)
	return p.containerEnded(ctx, c.Name, init, t)
}

func startFailure(err error) *corev1.ContainerStateTerminated {
	now := metav1.Now()
	return &corev1.ContainerStateTerminated{ExitCode: 128, Reason: reasonStartError, Message: err.Error(), StartedAt: now, FinishedAt: now}
}

// waitConfig prepares a container, retrying (and reporting the container
// waiting with CreateContainerConfigError) while its Secrets or ConfigMaps
// are missing; a permanent problem ends the container with StartError.
func (p *podRun) waitConfig(ctx context.Context, c corev1.Container, binary string, init bool) (*containerConfig, bool) {
	last := ""
	for {
		cfg, err := p.prepare(ctx, c, binary)
		if err == nil {
			return cfg, true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		if isPermanent(err) {
			p.logf("container %s: %v", c.Name, err)
			p.containerEnded(ctx, c.Name, init, startFailure(err))
			return nil, false
		}
		if msg := err.Error(); msg != last {
			last = msg
			p.logf("container %s waits: %s", c.Name, msg)
			p.mu.Lock()
			p.setContainer(c.Name, init, func(cs *corev1.ContainerStatus) {
				cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reasonConfigError, Message: msg}}
			})
			p.mu.Unlock()
			if err := p.report(ctx); err != nil {
				p.logf("%v", err)
			}
		}
		select {
		case <-p.terminateCh:
			return nil, false
		case <-p.killCh:
			return nil, false
		case <-time.After(time.Second):
		}
	}
}

// containerEnded records a container's end, reports it unless the pod's
// end is to be reported by no one, and returns whether it exited 0.
func (p *podRun) containerEnded(ctx context.Context, name string, init bool, t *corev1.ContainerStateTerminated) bool {
	p.mu.Lock()
	p.setContainer(name, init, func(cs *corev1.ContainerStatus) {
		cs.Ready, cs.Started = false, ptr.To(false)
		cs.State = corev1.ContainerState{Terminated: t}
	})
	p.mu.Unlock()
	if !p.isSilent() && !p.interrupted() {
		if err := p.report(ctx); err != nil {
			p.logf("%v", err)
		}
	}
	return t.ExitCode == 0
}

// terminationMessage reads the container's termination message file, or
// with FallbackToLogsOnError and a failure, the tail of its log.
func (p *podRun) terminationMessage(c corev1.Container, cr *containerRun, code int) string {
	data, _ := os.ReadFile(p.terminationFile(c.Name))
	if len(data) > maxTerminationMessage {
		data = data[:maxTerminationMessage]
	}
	if len(data) > 0 || code == 0 || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		return string(data)
	}
	text, err := readLogText(cr.logPath)
	if err != nil {
		return ""
	}
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > fallbackLogLines {
		lines = lines[len(lines)-fallbackLogLines:]
	}
	text = strings.Join(lines, "")
	if len(text) > fallbackLogBytes {
		text = text[len(text)-fallbackLogBytes:]
	}
	return text
}

// execute runs the container's process in its own mount namespace and
// process group, its output going to logFile, until it exits or the pod's
// end kills it; it returns the exit code (128+n for a signal n). The rest
// of the process group is killed when the process exits, as a container's
// processes end with it.
func (p *podRun) execute(cfg *containerConfig, binary string, logFile *os.File, cr *containerRun) (int, error) {
	sink := &logSink{f: logFile}
	defer func() {
		_ = logFile.Close()
		close(cr.logsDone)
	}()
	script, err := preludeScript()
	if err != nil {
		return 0, err
	}
	attr := &syscall.SysProcAttr{
		Unshareflags: syscall.CLONE_NEWNS,
		Setpgid:      true,
		Pdeathsig:    syscall.SIGKILL,
	}
	if userns, _ := userNamespace(p.pod); userns {
		ids, err := p.r.allocateIDs()
		if err != nil {
			return 0, err
		}
		defer p.r.releaseIDs(ids)
		if _, err := p.prepareUserNS(cfg, binary, ids); err != nil {
			return 0, fmt.Errorf("preparing the user namespace: %w", err)
		}
		if cfg.argv, err = withCapabilities(cfg.caps, cfg.argv); err != nil {
			return 0, err
		}
		// The mount namespace is made after the user namespace (Go
		// unshares it once the id maps are written), so the pod's root
		// owns it and may mount there.
		userNSAttr(attr, ids.base)
		p.logf("container in a user namespace: ids 0-%d are host ids %d-%d", usernsSize-1, ids.base, ids.base+usernsSize-1)
	}
	args := []string{"-c", script, "bed-container"}
	for _, m := range cfg.mounts {
		args = append(args, m.src, m.dst)
	}
	args = append(args, "--")
	if cfg.readOnlyRoot {
		// The host's / stands in for the image's root file system: the
		// container's mount namespace sees it read-only, its volumes on
		// top of it as they are.
		args = append(args, "/")
	}
	for _, m := range cfg.mounts {
		if m.readOnly {
			args = append(args, m.dst)
		}
	}
	args = append(args, "--", cfg.workDir)
	args = append(args, cfg.argv...)

	outR, outW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_ = outR.Close()
		_ = outW.Close()
		return 0, err
	}
	cmd := exec.Command("/bin/sh", args...)
	cmd.Env = cfg.env
	cmd.Stdout, cmd.Stderr = outW, errW
	cmd.SysProcAttr = attr
	err = cmd.Start()
	_ = outW.Close()
	_ = errW.Close()
	if err != nil {
		_ = outR.Close()
		_ = errR.Close()
		return 0, err
	}
	var pumps sync.WaitGroup
	pumps.Go(func() { sink.pump(outR, "stdout") })
	pumps.Go(func() { sink.pump(errR, "stderr") })

	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-p.killCh:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	case <-p.terminateCh:
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		p.mu.Lock()
		grace := p.grace
		p.mu.Unlock()
		timer := time.NewTimer(grace)
		select {
		case <-exited:
		case <-p.killCh:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-exited
		case <-timer.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-exited
		}
		timer.Stop()
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	// A process that left the group may still hold the pipes: stop
	// reading after a while.
	pumped := make(chan struct{})
	go func() {
		pumps.Wait()
		close(pumped)
	}()
	select {
	case <-pumped:
	case <-time.After(5 * time.Second):
		_ = outR.Close()
		_ = errR.Close()
		<-pumped
	}
	_ = outR.Close()
	_ = errR.Close()
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ws.ExitStatus(), nil
}

// logSink writes a container's output to its log file in the CRI format:
// one record per line, a line longer than the buffer cut into records
// tagged P ending with one tagged F, and output that ends without a newline
// tagged P.
type logSink struct {
	mu sync.Mutex
	f  *os.File
}

func (s *logSink) pump(r io.Reader, stream string) {
	br := bufio.NewReaderSize(r, 16*1024)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			tag := "P"
			if line[len(line)-1] == '\n' {
				tag, line = "F", line[:len(line)-1]
			}
			s.mu.Lock()
			_, _ = fmt.Fprintf(s.f, "%s %s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, tag, line)
			s.mu.Unlock()
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return
		}
	}
}
