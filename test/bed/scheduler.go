package bed

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// startScheduler runs the real kube-scheduler against the bed's apiserver.
func (b *Bed) startScheduler(ctx context.Context) error {
	bin, err := Tool("kube-scheduler")
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	// The configuration file rather than the deprecated flags. Its client
	// may send 500 requests a second: the default 50 would make binding
	// (one request a pod, plus an event) the slowest part of any test
	// that creates pods by the hundred, as a busy cluster's scheduler is
	// configured not to be.
	config := filepath.Join(b.Dir, "kube-scheduler.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
`, b.Kubeconfig)), 0o600); err != nil {
		return err
	}
	p, err := startProcess("kube-scheduler", b.Dir, bin, []string{
		"--config=" + config,
		"--authentication-kubeconfig=" + b.Kubeconfig,
		"--authorization-kubeconfig=" + b.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--v=2",
	}, nil)
	if err != nil {
		return err
	}
	p.addr = "127.0.0.1:" + strconv.Itoa(port)
	b.procs = append(b.procs, p)
	return waitHealthy(ctx, p, port)
}

// startControllerManager runs kube-controller-manager with only the
// controllers tests need: owner-reference garbage collection, namespace
// deletion, Deployments' ReplicaSets and pods, and Services' endpoints
// (through which the apiserver reaches webhooks). Node lifecycle stays off:
// kwok's nodes send no heartbeats.
func (b *Bed) startControllerManager(ctx context.Context) error {
	bin, err := Tool("kube-controller-manager")
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	controllers := "garbagecollector,namespace,deployment,replicaset,endpoint,endpointslice,disruption"
	if b.Node != nil {
		// Real pods need their service account and the root CA ConfigMap
		// their token volume projects.
		controllers += ",serviceaccount,root-ca-cert-publisher,daemonset,statefulset,job"
	}
	p, err := startProcess("kube-controller-manager", b.Dir, bin, []string{
		"--kubeconfig=" + b.Kubeconfig,
		"--authentication-kubeconfig=" + b.Kubeconfig,
		"--authorization-kubeconfig=" + b.Kubeconfig,
		"--controllers=" + controllers,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--v=1",
	}, nil)
	if err != nil {
		return err
	}
	p.addr = "127.0.0.1:" + strconv.Itoa(port)
	b.procs = append(b.procs, p)
	return waitHealthy(ctx, p, port)
}

// waitHealthy waits until a component's /healthz on 127.0.0.1:port says ok.
func waitHealthy(ctx context.Context, p *process, port int) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	hc := &http.Client{
		Timeout: 2 * time.Second,
		// The component's serving certificate is self-signed.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	return waitFor(ctx, p, p.name+" /healthz", func(ctx context.Context) error {
		return answersOK(ctx, hc, url)
	})
}
