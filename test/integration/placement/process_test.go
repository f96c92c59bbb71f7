package placement

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/archway-build/archway/test/bed"
)

// placementProcess is build-controller run as a process with
// --controllers=pod-placement,placement-webhook, the way it is deployed, so
// that its CPU and memory can be read from /proc and it can be stopped with
// SIGTERM.
type placementProcess struct {
	cmd     *exec.Cmd
	logPath string
	stop    func() error
}

// buildPlacementBinary builds build-controller into dir.
func buildPlacementBinary(ctx context.Context, tb testing.TB, dir string) string {
	tb.Helper()
	bin, err := bed.GoBuild(ctx, dir, "./cmd/build-controller")
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// startPlacementProcess starts bin in dir (its certificates, config and log
// there, name telling runs apart) and waits until it is ready: its
// webhook's informers have synced. Its heartbeat lease is the one the
// suite's webhook reads, so the suite's controller must be stopped first.
// It runs the placement controller and webhook without leader election
// unless args (appended to the command line, so they win; --controllers=
// replaces the components) say otherwise.
func startPlacementProcess(ctx context.Context, tb testing.TB, bin, dir, name string, args ...string) *placementProcess {
	tb.Helper()
	dir = filepath.Join(dir, name)
	certs := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		tb.Fatal(err)
	}
	if _, err := bed.WriteServingCert(certs); err != nil {
		tb.Fatal(err)
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: config.archway.dev/v1alpha1
kind: BuildControllerConfiguration
build:
  builderImage: registry.example.com/archway/builder:test
placement:
  insecureRegistries: [%q, %q]
  inspection: {tries: 2, backoff: 100ms}
`, testBed.Registry.Host, testBed.AuthRegistry.Host)), 0o600); err != nil {
		tb.Fatal(err)
	}
	var ports [2]int
	for i := range ports {
		var err error
		if ports[i], err = bed.FreePort(); err != nil {
			tb.Fatal(err)
		}
	}
	webhookPort, probePort := ports[0], ports[1]
	p := &placementProcess{logPath: filepath.Join(dir, "build-controller.log")}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		tb.Fatal(err)
	}
	p.cmd = exec.Command(bin,
		"--kubeconfig="+testBed.Kubeconfig,
		"--config="+config,
		"--leader-elect=false",
		fmt.Sprintf("--webhook-port=%d", webhookPort),
		"--webhook-cert-dir="+certs,
		"--metrics-bind-address=0",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
	)
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--controllers=") }) {
		p.cmd.Args = append(p.cmd.Args, "--controllers=pod-placement,placement-webhook")
	}
	p.cmd.Args = append(p.cmd.Args, args...)
	// Its heartbeat lease where the suite's webhook looks for it.
	p.cmd.Env = append(os.Environ(), "POD_NAMESPACE="+suiteOptions().Namespace)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	var exitErr error
	p.stop = sync.OnceValue(func() error {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		exitErr = p.cmd.Wait()
		_ = logFile.Close()
		return exitErr
	})
	tb.Cleanup(func() { _ = p.stop() })
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, bed.CaseTimeout, true, func(context.Context) (bool, error) {
		resp, err := http.Get(readyz)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		tb.Fatalf("build-controller never became ready: %v; log:\n%s", err, p.log(40))
	}
	return p
}

func (p *placementProcess) pid() int { return p.cmd.Process.Pid }

// kill ends the process with SIGKILL, as a crash or a lost node would: no
// lease released, nothing cleaned up. It returns once the process is gone.
func (p *placementProcess) kill(tb testing.TB) {
	tb.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		tb.Fatal(err)
	}
	if err := p.stop(); err == nil {
		tb.Fatal("build-controller exited cleanly after SIGKILL")
	}
}

// log is the last lines of the process's log.
func (p *placementProcess) log(lines int) string {
	data, _ := os.ReadFile(p.logPath)
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// memory is the process's resident set size and its high-water mark, in
// MiB (VmRSS, VmHWM).
func (p *placementProcess) memory(tb testing.TB) (rss, peak float64) {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	read := func(line string) float64 {
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(line), " kB"), 64)
		return kb / 1024
	}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			rss = read(rest)
		} else if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			peak = read(rest)
		}
	}
	return rss, peak
}

// cpu is the CPU seconds the process has used so far.
func (p *placementProcess) cpu(tb testing.TB) float64 {
	tb.Helper()
	s, err := bed.CPUSeconds(p.pid())
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// loadAverage is the machine's 1, 5 and 15 minute load averages.
func loadAverage() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
