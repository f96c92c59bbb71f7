package bed

import (
	"context"
	_ "embed"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// kwokStages is kwok's configuration: which changes it makes to nodes and
// pods on its own. See the file for the rules.
//
//go:embed kwok/stages.yaml
var kwokStages []byte

const (
	// ManualPodLabel makes kwok leave a pod entirely to the test (or the
	// bed's pod runner): it is not made Running and, once deleted, it is
	// removed only after it has ended. Pods with the label
	// openshift.io/build.name (archway's build pods) are treated the same.
	ManualPodLabel = "bed.archway.dev/manual"
)

// kwokNodeSelection is kwok's flag choosing its nodes: every node, unless
// the bed has a real node, whose kubelet kwok must leave alone; then the
// nodes the bed created (annotated kwokNodeAnnotation).
func (b *Bed) kwokNodeSelection() string {
	if b.Node != nil {
		return "--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake"
	}
	return "--manage-all-nodes=true"
}

// startKwok runs kwok with the bed's stages and creates the nodes.
func (b *Bed) startKwok(ctx context.Context, nodes []Node) error {
	bin, err := Tool("kwok")
	if err != nil {
		return err
	}
	config := filepath.Join(b.Dir, "kwok.yaml")
	if err := os.WriteFile(config, kwokStages, 0o600); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	// The nodes advertise the bed's own kubelet endpoint, which the pod
	// runner answers: `kubectl logs` of the pods it runs works.
	if b.kubelet, err = startKubeletServer(); err != nil {
		return fmt.Errorf("kubelet endpoint: %w", err)
	}
	p, err := startProcess("kwok", b.Dir, bin, []string{
		"--kubeconfig=" + b.Kubeconfig,
		"--config=" + config,
		b.kwokNodeSelection(),
		"--node-ip=127.0.0.1",
		"--node-port=" + strconv.Itoa(b.kubelet.Port()),
		"--cidr=10.244.0.0/16",
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
	}, nil)
	if err != nil {
		return err
	}
	p.addr = "127.0.0.1:" + strconv.Itoa(port)
	b.procs = append(b.procs, p)
	b.kwok = p
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", port)
	err = waitFor(hctx, p, "kwok /healthz", func(ctx context.Context) error {
		return answersOK(ctx, http.DefaultClient, url)
	})
	if err != nil {
		return err
	}
	nctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return b.AddNodes(nctx, nodes...)
}
