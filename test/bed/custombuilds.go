package bed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// CustomBuildsWebhookConfiguration is the file, relative to the
// repository's root, of the configuration that has OpenShift's build API
// call build-controller's custom-builds-webhook.
const CustomBuildsWebhookConfiguration = "manifests/openshift-builds/webhook/validating_webhook_configuration.yaml"

// CustomBuildsWebhook is build-controller's custom-builds-webhook run as a
// process of the bed, as manifests/openshift-builds/webhook runs it in
// pods: its configuration points the API servers at the process.
type CustomBuildsWebhook struct {
	proc *process
	// Name is the webhook configuration's name.
	Name string
}

// StartCustomBuildsWebhook runs binary (build-controller) with
// --controllers=custom-builds-webhook in namespace archway-system, serving
// a certificate for 127.0.0.1, and creates the webhook configuration of
// CustomBuildsWebhookConfiguration with its Service replaced by the
// process's address and its CA. It returns once the process is ready (its
// ConfigMap informer synced) and the API server of build.openshift.io,
// which must be served, calls it.
func (b *Bed) StartCustomBuildsWebhook(ctx context.Context, binary string) (*CustomBuildsWebhook, error) {
	dir, err := os.MkdirTemp(b.Dir, "custom-builds-webhook-")
	if err != nil {
		return nil, err
	}
	ca, err := WriteServingCert(dir)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	probes, err := freePort()
	if err != nil {
		return nil, err
	}
	p, err := startProcess("custom-builds-webhook", dir, binary, []string{
		"--controllers=custom-builds-webhook", "--leader-elect=false",
		"--cert-management=external", "--webhook-cert-dir=" + dir,
		"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(port),
		"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probes),
		"--kubeconfig=" + b.Kubeconfig,
	}, []string{"POD_NAMESPACE=archway-system"})
	if err != nil {
		return nil, err
	}
	w := &CustomBuildsWebhook{proc: p}
	b.procs = append(b.procs, p)
	startCtx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	ready := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(probes)) + "/readyz"
	if err := waitFor(startCtx, p, "custom-builds-webhook to be ready", func(ctx context.Context) error {
		return answersOK(ctx, http.DefaultClient, ready)
	}); err != nil {
		p.Stop()
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(RepoRoot(), CustomBuildsWebhookConfiguration))
	if err != nil {
		return nil, err
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", CustomBuildsWebhookConfiguration, err)
	}
	for i := range cfg.Webhooks {
		cc := &cfg.Webhooks[i].ClientConfig
		url := fmt.Sprintf("https://%s%s", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), *cc.Service.Path)
		cc.Service, cc.URL, cc.CABundle = nil, &url, ca
	}
	// A configuration of an earlier run names another address and CA:
	// replace it.
	if err := b.Client.Delete(ctx, cfg.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
		p.Stop()
		return nil, err
	}
	if err := b.Client.Create(ctx, &cfg); err != nil {
		p.Stop()
		return nil, err
	}
	w.Name = cfg.Name
	// The API server of build.openshift.io calls the webhook from its next
	// informer update: wait until it refuses a builder image the
	// ConfigMap cannot name (not by digest).
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "build.openshift.io/v1", "kind": "Build",
		"metadata": map[string]any{"generateName": "probe-", "namespace": metav1.NamespaceDefault},
		"spec": map[string]any{
			"source":   map[string]any{"type": "Dockerfile", "dockerfile": "FROM scratch\n"},
			"strategy": map[string]any{"type": "Custom", "customStrategy": map[string]any{"from": map[string]any{"kind": "DockerImage", "name": "probe.invalid/builder:0"}}},
		},
	}}
	if err := waitFor(startCtx, p, "the API server of build.openshift.io to call custom-builds-webhook", func(ctx context.Context) error {
		err := b.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if err == nil {
			return errors.New("a Build of another builder image was admitted")
		}
		if !strings.Contains(err.Error(), "may run only archway's builder image") {
			return err
		}
		return nil
	}); err != nil {
		p.Stop()
		return nil, err
	}
	return w, nil
}

// Stop ends the process; the webhook configuration stays, so that the API
// servers' calls fail as they do while the webhook's pods are down.
func (w *CustomBuildsWebhook) Stop() { w.proc.Stop() }
