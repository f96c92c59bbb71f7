package protection

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/archway-build/archway/test/bed"
)

// component is a control-plane program this suite runs as a child.
type component struct {
	name string
	cmd  *exec.Cmd
	done chan error
}

// startComponent runs one of the bed's binaries with a kubeconfig that
// impersonates user (and groups), as the program would authenticate in a
// cluster. args gets the path of that kubeconfig and of the work directory.
func startComponent(_ context.Context, name, user string, groups []string, args func(kubeconfig, dir string) ([]string, error)) (*component, error) {
	bin, err := bed.Tool(name)
	if err != nil {
		return nil, err
	}
	kc, err := clientcmd.LoadFromFile(testBed.Kubeconfig)
	if err != nil {
		return nil, err
	}
	for _, a := range kc.AuthInfos {
		a.Impersonate, a.ImpersonateGroups = user, groups
	}
	path := filepath.Join(testBed.Dir, name+"-kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return nil, err
	}
	argv, err := args(path, testBed.Dir)
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(testBed.Dir, name+".log"))
	if err != nil {
		return nil, err
	}
	c := &component{name: name, cmd: exec.Command(bin, argv...), done: make(chan error, 1)}
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	if err := c.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { c.done <- c.cmd.Wait(); _ = logFile.Close() }()
	return c, nil
}

// stop ends the program (SIGTERM, then SIGKILL after 10 s) and waits.
func (c *component) stop() {
	if c == nil || c.cmd.Process == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// schedulerArgs configure kube-scheduler as the bed does (a client allowed
// 500 requests a second, no leader election), with no serving port.
func schedulerArgs(kubeconfig, dir string) ([]string, error) {
	config := filepath.Join(dir, "protection-kube-scheduler.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`, kubeconfig)), 0o600); err != nil {
		return nil, err
	}
	return []string{"--config=" + config, "--secure-port=0", "--v=2"}, nil
}

// controllerManagerArgs run every controller of kube-controller-manager
// that creates pods or the objects that do (DaemonSet, Deployment,
// ReplicaSet, StatefulSet, Job, CronJob, ReplicationController) and the
// garbage collector, each under its own service account
// (--use-service-account-credentials), as a cluster runs them.
func controllerManagerArgs(kubeconfig, _ string) ([]string, error) {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=daemonset,deployment,replicaset,statefulset,job,cronjob,replicationcontroller,garbagecollector",
		"--use-service-account-credentials=true",
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	}, nil
}
