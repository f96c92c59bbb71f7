// Command bed runs archway's test bed for people: `bed up` starts it in the
// background and prints how to reach it, `bed down` stops it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/archway-build/archway/test/bed"
)

// state is what a running bed tells `bed up`, `bed down` and people.
type state struct {
	PID          int    `json:"pid"`
	Kubeconfig   string `json:"kubeconfig"`
	Registry     string `json:"registry"`
	AuthRegistry string `json:"authRegistry,omitempty"`
	AuthUser     string `json:"authUser,omitempty"`
	AuthPassword string `json:"authPassword,omitempty"`
	BaseImage    string `json:"baseImage"`
	Dir          string `json:"dir"`
	RealNode     string `json:"realNode,omitempty"`
	Error        string `json:"error,omitempty"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: bed up [--controller-manager] [--real-node] [--runner [--builder-image REF]] | bed down | bed status")
		os.Exit(2)
	}
	dir := filepath.Join(bed.CacheDir(), "bed")
	var err error
	switch os.Args[1] {
	case "up":
		err = up(dir, os.Args[2:])
	case "serve":
		err = serve(dir, os.Args[2:])
	case "down":
		err = down(dir)
	case "status":
		var st *state
		if st, err = readState(dir); err == nil {
			printState(st)
		}
	default:
		err = fmt.Errorf("unknown command %q: use up, down or status", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bed:", err)
		os.Exit(1)
	}
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

func readState(dir string) (*state, error) {
	data, err := os.ReadFile(statePath(dir))
	if err != nil {
		return nil, fmt.Errorf("no bed is running (no %s): start one with `make bed-up`", statePath(dir))
	}
	st := &state{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, err
	}
	return st, nil
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// up starts `bed serve` detached from the terminal and waits until it is ready.
func up(dir string, args []string) error {
	if st, err := readState(dir); err == nil && alive(st.PID) {
		fmt.Println("A bed is already running.")
		printState(st)
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "bed.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(self, append([]string{"serve"}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Println("Starting the bed (log:", logFile.Name()+")...")
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if st, err := readState(dir); err == nil {
			if st.Error != "" {
				return errors.New(st.Error)
			}
			printState(st)
			return nil
		}
		if !alive(cmd.Process.Pid) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	data, _ := os.ReadFile(logFile.Name())
	return fmt.Errorf("the bed did not come up; its log:\n%s", data)
}

// serve runs the bed until SIGTERM or SIGINT.
func serve(dir string, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	kcm := fs.Bool("controller-manager", false, "also run kube-controller-manager (garbage collection, namespace deletion)")
	realNode := fs.Bool("real-node", false, "also run a real node: containerd, runc and a kubelet on this machine (root; hack/tools.sh node)")
	runner := fs.Bool("runner", false, "run the pod runner on the kwok nodes, with the builder built from this repository as --builder-image")
	builderImage := fs.String("builder-image", "ghcr.io/archway-build/builder:latest", "the image the pod runner runs the builder for (the build controller's builderImage)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	opts := bed.Options{Dir: filepath.Join(dir, "run"), ControllerManager: *kcm, AuthRegistry: true, RealNode: *realNode}
	if *runner {
		binDir := filepath.Join(dir, "bin")
		if err := os.MkdirAll(binDir, 0o755); err != nil {
			return err
		}
		builder, err := bed.GoBuild(ctx, binDir, "./cmd/builder")
		if err != nil {
			return err
		}
		opts.Runner = &bed.RunnerOptions{Images: map[string]string{*builderImage: builder}, InClusterConfig: true}
	}
	b, err := bed.Start(ctx, opts)
	if err != nil {
		_ = writeState(dir, &state{PID: os.Getpid(), Error: err.Error()})
		return err
	}
	defer b.Stop()
	st := &state{
		PID: os.Getpid(), Kubeconfig: b.Kubeconfig, Registry: b.Registry.Host, BaseImage: b.BaseImage, Dir: b.Dir,
		AuthRegistry: b.AuthRegistry.Host, AuthUser: b.AuthRegistry.Username, AuthPassword: b.AuthRegistry.Password,
	}
	if b.Node != nil {
		st.RealNode = b.Node.Name + " at " + b.Node.IP + " (containerd socket " + b.Node.ContainerdSocket + ")"
	}
	if err := writeState(dir, st); err != nil {
		return err
	}
	<-ctx.Done()
	fmt.Println("bed: stopping")
	_ = os.Remove(statePath(dir))
	return nil
}

func writeState(dir string, st *state) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(dir) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(dir))
}

func down(dir string) error {
	st, err := readState(dir)
	if err != nil {
		fmt.Println("No bed is running.")
		return nil
	}
	if alive(st.PID) {
		_ = syscall.Kill(st.PID, syscall.SIGTERM)
		for i := 0; i < 300 && alive(st.PID); i++ {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(st.PID) {
			return errors.New("the bed (pid " + strconv.Itoa(st.PID) + ") did not stop in 30s")
		}
	}
	_ = os.Remove(statePath(dir))
	fmt.Println("The bed is stopped.")
	return nil
}

func printState(st *state) {
	fmt.Printf(`The bed is running (pid %d).
  export KUBECONFIG=%s
  kubectl:        %s/kubectl get nodes -L kubernetes.io/arch
  registry:       %s  (plain HTTP, e.g. curl http://%s/v2/_catalog)
  auth registry:  %s  (user %s, password %s)
  base image:     %s  (busybox for linux/amd64, arm64, ppc64le, s390x, arm/v7)
  logs:           %s/*.log
`, st.PID, st.Kubeconfig, assetsDir(), st.Registry, st.Registry, st.AuthRegistry, st.AuthUser, st.AuthPassword, st.BaseImage, st.Dir)
	if st.RealNode != "" {
		fmt.Printf("  real node:      %s\n", st.RealNode)
	}
	fmt.Println("Stop it with: make bed-down")
}

func assetsDir() string {
	d, err := bed.AssetsDir()
	if err != nil {
		return "<assets>"
	}
	return d
}
