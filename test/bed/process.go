package bed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is a child program of the bed: its output goes to a log file, it is
// killed when the process that started it dies (Pdeathsig), and Stop ends it
// with SIGTERM, then SIGKILL.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	// addr is the host:port the process serves on, when known.
	addr    string
	done    chan struct{}
	waitErr error
	once    sync.Once
}

// startProcess starts binary with args, logging to dir/<name>.log.
func startProcess(name, dir, binary string, args []string, env []string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: creating log file: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(cleanEnv(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// The bed's children die with the test binary, even on SIGKILL.
		Pdeathsig: syscall.SIGKILL,
		Setpgid:   true,
	}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("%s: starting %s: %w", name, binary, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// cleanEnv is the environment of the bed's children without variables that
// change their behaviour behind the bed's back: etcd reads every ETCD_* name
// as a flag, the registry every REGISTRY_* name as configuration, and
// proxies would route loopback traffic away.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		if strings.HasPrefix(upper, "ETCD_") || strings.HasPrefix(upper, "REGISTRY_") || strings.HasSuffix(upper, "_PROXY") || upper == "KUBECONFIG" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// failure describes an early exit with the tail of the process's log.
func (p *process) failure() error {
	return fmt.Errorf("%s exited early (%w); last lines of %s:\n%s", p.name, p.waitErr, p.logPath, tail(p.logPath, 15))
}

// Stop ends the process and its process group, politely first.
func (p *process) Stop() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		pgid := -p.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-p.done
		}
		// Whatever the group leader left behind goes too.
		_ = syscall.Kill(pgid, syscall.SIGKILL)
	})
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return "    " + strings.Join(all, "\n    ")
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitFor polls check until it returns nil, the process exits, or ctx ends.
func waitFor(ctx context.Context, p *process, what string, check func(context.Context) error) error {
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		if p != nil && p.exited() {
			return p.failure()
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("timed out waiting for %s: %v", what, last)
			if p != nil {
				msg += fmt.Sprintf("; last lines of %s:\n%s", p.logPath, tail(p.logPath, 15))
			}
			return errors.New(msg)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// answersOK returns nil when a GET of url by hc answers 200 OK: a wait's
// check of a process's health or readiness endpoint.
func answersOK(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}
