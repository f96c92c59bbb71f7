// Package framework runs archway end to end on one machine, for the e2e
// suites and `make demo`: it builds the real binaries, starts the bed with
// its pod runner (so build pods bound to the arch nodes run `builder` as
// processes), and runs build-controller as a process of its own, configured
// by a --config file as in a cluster.
package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/archway-build/archway/test/bed"
)

// BuilderImage is the builder image build-controller puts in build pods;
// the pod runner runs the locally built builder binary for it.
const BuilderImage = "quay.io/archway/builder:e2e"

// BuildTags are the tags every build of archway's buildah code needs.
const BuildTags = bed.BuildTags

// Platforms are the four platforms of the bed's nodes, and UnameOf what
// `uname -m` prints on each.
var (
	Platforms = []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}
	UnameOf   = map[string]string{"linux/amd64": "x86_64", "linux/arm64": "aarch64", "linux/ppc64le": "ppc64le", "linux/s390x": "s390x"}
)

// Binaries are the paths of the programs under test.
type Binaries struct {
	Builder    string
	Controller string
}

// BuildBinaries builds cmd/builder and cmd/build-controller into dir with
// the build tags, one after the other (two large links at once crawl on 2
// cores). Go's build cache makes a second call take a few seconds.
func BuildBinaries(ctx context.Context, dir string) (Binaries, error) {
	var bins Binaries
	var err error
	if bins.Builder, err = bed.GoBuild(ctx, dir, "./cmd/builder"); err != nil {
		return bins, err
	}
	bins.Controller, err = bed.GoBuild(ctx, dir, "./cmd/build-controller")
	return bins, err
}

// Options configure an Env.
type Options struct {
	// Binaries are the programs to run (see BuildBinaries).
	Binaries Binaries
	// Bed are the bed's options; Runner is set by Start.
	Bed bed.Options
	// ControllerArgs are added to build-controller's command line.
	ControllerArgs []string
}

// Env is a running bed with the pod runner and build-controller.
type Env struct {
	Bed      *bed.Bed
	Binaries Binaries
	// ControllerLog is the file build-controller writes its log to.
	ControllerLog string
	// MetricsURL is build-controller's metrics endpoint: https unless
	// ControllerArgs hold --metrics-secure=false.
	MetricsURL string
	// WebhookURL is the base of build-controller's SCM webhook endpoint
	// (https://127.0.0.1:<port>, component buildconfig-webhooks), and
	// WebhookClient an HTTP client that trusts its certificate.
	WebhookURL    string
	WebhookClient *http.Client
	// WebhookCAFile is the CA file of the endpoint's certificate.
	WebhookCAFile string

	opts        Options
	podSecurity string // build.podSecurity of the controller's config
	buildExtra  string // more of the config's build section (YAML, indented by two)
	controller  *exec.Cmd
	done        chan error
	ownBed      bool // started by Start: Stop stops it
}

// Start checks qemu, starts the bed, the pod runner and build-controller.
// On error everything already started is stopped.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	if err := bed.CheckQemu(); err != nil {
		return nil, err
	}
	b, err := bed.Start(ctx, opts.Bed)
	if err != nil {
		return nil, err
	}
	e, err := StartOn(ctx, b, opts)
	if err != nil {
		_ = b.Stop()
		return nil, err
	}
	e.ownBed = true
	return e, nil
}

// StartOn starts the pod runner and build-controller on a running bed
// (opts.Bed is not used); Env.Stop then stops them, not the bed. On error
// what it started is stopped.
func StartOn(ctx context.Context, b *bed.Bed, opts Options) (_ *Env, err error) {
	e := &Env{Bed: b, Binaries: opts.Binaries, opts: opts}
	defer func() {
		if err != nil {
			e.StopController()
		}
	}()
	// Build pods reach the apiserver with the bed's kubeconfig: the runner
	// has no in-cluster network (see bed.Bed.PodKubeconfig).
	podKubeconfig, err := b.PodKubeconfig()
	if err != nil {
		return nil, err
	}
	// The git sources are file:// repositories owned by the host's root,
	// who is no one in a pod's user namespace: git refuses such a
	// repository ("dubious ownership") unless its system config trusts it.
	// (A remote repository, served over http or ssh, has no owner to check.)
	gitConfig := filepath.Join(b.Dir, "gitconfig-pods")
	if err := os.WriteFile(gitConfig, []byte("[safe]\n\tdirectory = *\n"), 0o644); err != nil {
		return nil, err
	}
	if _, err := b.StartPodRunner(ctx, bed.RunnerOptions{
		Images: map[string]string{BuilderImage: opts.Binaries.Builder},
		Env:    []string{"KUBECONFIG=" + podKubeconfig, "GIT_CONFIG_SYSTEM=" + gitConfig},
	}); err != nil {
		return nil, err
	}
	if err := e.StartController(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// controllerConfig is build-controller's --config on the bed, with
// build.podSecurity when podSecurity is set: the bed serves Git
// repositories from directories (file://), which clusters do not allow.
func controllerConfig(podSecurity, buildExtra string) string {
	cfg := `apiVersion: config.archway.dev/v1alpha1
kind: BuildControllerConfiguration
build:
  builderImage: ` + BuilderImage + `
  allowFileGitURIs: true
`
	if podSecurity != "" {
		cfg += "  podSecurity: " + podSecurity + "\n"
	}
	return cfg + buildExtra
}

// insecureRegistries is the config's placement section naming the bed's
// registries, which serve plain HTTP on loopback, insecure: the Build
// controller's base-image check reaches registries as placement and nodes
// do, a loopback one verified unless listed.
func (e *Env) insecureRegistries() string {
	hosts := []string{e.Bed.Registry.Host}
	if e.Bed.AuthRegistry != nil {
		hosts = append(hosts, e.Bed.AuthRegistry.Host)
	}
	return "placement:\n  insecureRegistries: [" + strings.Join(hosts, ", ") + "]\n"
}

// RestartControllerWithBuildConfig stops build-controller and starts it
// again with buildExtra (YAML, each line indented by two spaces) added to
// its config's build section; "" goes back to the suite's config.
func (e *Env) RestartControllerWithBuildConfig(ctx context.Context, buildExtra string) error {
	e.StopController()
	e.buildExtra = buildExtra
	return e.StartController(ctx)
}

// RestartController stops build-controller and starts it again with
// build.podSecurity set to podSecurity ("" for the default).
func (e *Env) RestartController(ctx context.Context, podSecurity string) error {
	e.StopController()
	e.podSecurity = podSecurity
	return e.StartController(ctx)
}

// StartController runs build-controller as a process: its --config names
// the builder image the runner maps to the builder binary, --kubeconfig the
// bed, with leader election on and metrics and probes on free loopback
// ports (metrics over HTTPS with authorization, as deployed). It returns
// once the process serves its readiness probe and its metrics endpoint
// listens.
func (e *Env) StartController(ctx context.Context) error {
	cfg := filepath.Join(e.Bed.Dir, "build-controller.yaml")
	if err := os.WriteFile(cfg, []byte(controllerConfig(e.podSecurity, e.buildExtra)+e.insecureRegistries()), 0o644); err != nil {
		return err
	}
	metrics, err := freePort()
	if err != nil {
		return err
	}
	probes, err := freePort()
	if err != nil {
		return err
	}
	e.MetricsURL = fmt.Sprintf("https://127.0.0.1:%d/metrics", metrics)
	if slices.Contains(e.opts.ControllerArgs, "--metrics-secure=false") {
		e.MetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
	}
	hooks, err := freePort()
	if err != nil {
		return err
	}
	certDir := filepath.Join(e.Bed.Dir, "build-controller-webhook-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return err
	}
	caPEM, err := bed.WriteServingCert(certDir)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	e.WebhookCAFile = filepath.Join(e.Bed.Dir, "build-controller-webhook-ca.crt")
	if err := os.WriteFile(e.WebhookCAFile, caPEM, 0o644); err != nil {
		return err
	}
	e.WebhookURL = fmt.Sprintf("https://127.0.0.1:%d", hooks)
	e.WebhookClient = &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	e.ControllerLog = filepath.Join(e.Bed.Dir, "build-controller.log")
	logFile, err := os.OpenFile(e.ControllerLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	args := append([]string{
		"--config=" + cfg,
		"--kubeconfig=" + e.Bed.Kubeconfig,
		"--controllers=build,buildconfig,buildconfig-webhooks",
		"--webhook-port=" + strconv.Itoa(hooks),
		"--webhook-cert-dir=" + certDir,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metrics),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probes),
		"--leader-elect=true",
		"--leader-election-namespace=kube-system",
	}, e.opts.ControllerArgs...)
	cmd := exec.Command(e.Binaries.Controller, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting build-controller: %w", err)
	}
	e.controller, e.done = cmd, make(chan error, 1)
	go func() { e.done <- cmd.Wait() }()
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", probes)
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case err := <-e.done:
			e.done <- err
			return fmt.Errorf("build-controller exited at start (%w); its log %s ends:\n%s", err, e.ControllerLog, tailFile(e.ControllerLog, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			// The metrics server may start after the probes: ready
			// means both listen.
			if resp.StatusCode == http.StatusOK && listening(metrics) && listening(hooks) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("build-controller not ready after a minute; log %s", e.ControllerLog)
		}
	}
}

// StopController stops build-controller with SIGTERM (it releases its
// lease), and SIGKILL after 10 s.
func (e *Env) StopController() {
	if e.controller == nil {
		return
	}
	_ = e.controller.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-e.controller.Process.Pid, syscall.SIGKILL)
		<-e.done
	}
	e.controller = nil
}

// Stop stops build-controller, then, if Start started it, the bed (runner,
// pods' processes and all). It is safe to call more than once.
func (e *Env) Stop() error {
	if e == nil {
		return nil
	}
	e.StopController()
	if !e.ownBed {
		return nil
	}
	return e.Bed.Stop()
}

// listening reports whether something accepts connections on the
// loopback port.
func listening(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailFile returns the last lines of a file, for error messages.
func tailFile(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	end := len(data)
	for n := 0; end > 0 && n <= lines; {
		end--
		if data[end] == '\n' {
			n++
		}
	}
	if end > 0 {
		end++
	}
	return string(data[end:])
}

// ErrNoGit is returned when the git CLI is missing.
var ErrNoGit = errors.New("the git CLI is not installed: run `make tools` or apt-get install git")

// GitRepo makes a git repository in dir holding files (path -> content) on
// branch main, and returns its file:// URL, which builders clone as they
// would a remote.
func GitRepo(dir string, files map[string]string) (string, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return "", ErrNoGit
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	git := func(args ...string) error {
		cmd := exec.Command("git", append([]string{"-c", "user.name=archway", "-c", "user.email=archway@example.invalid"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %w\n%s", args, err, out)
		}
		return nil
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"commit", "-q", "-m", "archway example"}} {
		if err := git(args...); err != nil {
			return "", err
		}
	}
	// Builders run in user namespaces: the repository must be readable
	// by others, as a git server would serve it.
	if err := bed.SearchableByOthers(dir); err != nil {
		return "", err
	}
	return "file://" + dir, nil
}

// Kubectl runs the bed's kubectl with its kubeconfig and returns the
// combined output.
func (e *Env) Kubectl(ctx context.Context, args ...string) (string, error) {
	kubectl, err := bed.Tool("kubectl")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", e.Bed.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
