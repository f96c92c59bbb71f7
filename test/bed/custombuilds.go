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
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// CustomBuildsWebhookConfiguration is the file, relative to the
// repository's root, of the configuration that has OpenShift's build API
// call build-controller's custom-builds-webhook.
const CustomBuildsWebhookConfiguration = "manifests/openshift-builds/webhook/validating_webhook_configuration.yaml"

// StartCustomBuildsWebhook runs binary (build-controller) with
// --controllers=custom-builds-webhook in namespace archway-system, as the
// service account of manifests/openshift-builds/webhook with its roles, serving
// a certificate for 127.0.0.1, and creates the webhook configuration of
// CustomBuildsWebhookConfiguration with its Service replaced by the
// process's address and its CA. It returns once the process is ready (its
// ConfigMap informer synced) and the API server of build.openshift.io,
// which must be served, calls it. The bed stops the process with its
// other programs.
func (b *Bed) StartCustomBuildsWebhook(ctx context.Context, binary string) error {
	dir, err := os.MkdirTemp(b.Dir, "custom-builds-webhook-")
	if err != nil {
		return err
	}
	ca, err := WriteServingCert(dir)
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	probes, err := freePort()
	if err != nil {
		return err
	}
	// The webhook runs with the rights of its service account in
	// manifests/openshift-builds/webhook, no more.
	kubeconfig, err := b.customBuildsKubeconfig(ctx, dir)
	if err != nil {
		return err
	}
	p, err := startProcess("custom-builds-webhook", dir, binary, []string{
		"--controllers=custom-builds-webhook", "--leader-elect=false",
		"--cert-management=external", "--webhook-cert-dir=" + dir,
		"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(port),
		"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(probes),
		"--kubeconfig=" + kubeconfig,
	}, []string{"POD_NAMESPACE=archway-system"})
	if err != nil {
		return err
	}
	b.procs = append(b.procs, p)
	startCtx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	ready := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(probes)) + "/readyz"
	if err := waitFor(startCtx, p, "custom-builds-webhook to be ready", func(ctx context.Context) error {
		return answersOK(ctx, http.DefaultClient, ready)
	}); err != nil {
		p.Stop()
		return err
	}
	data, err := os.ReadFile(filepath.Join(RepoRoot(), CustomBuildsWebhookConfiguration))
	if err != nil {
		return err
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return fmt.Errorf("%s: %w", CustomBuildsWebhookConfiguration, err)
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
		return err
	}
	if err := b.Client.Create(ctx, &cfg); err != nil {
		p.Stop()
		return err
	}
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
		return err
	}
	return nil
}

// customBuildsRBAC is the file of the webhook's service account and roles.
const customBuildsRBAC = "manifests/openshift-builds/webhook/rbac.yaml"

// customBuildsKubeconfig creates the objects of customBuildsRBAC (and
// archway's namespace) and writes into dir a kubeconfig of a token of
// their service account.
func (b *Bed) customBuildsKubeconfig(ctx context.Context, dir string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "archway-system"}}
	if err := b.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	data, err := os.ReadFile(filepath.Join(RepoRoot(), customBuildsRBAC))
	if err != nil {
		return "", err
	}
	account := ""
	for _, doc := range strings.Split(string(data), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return "", fmt.Errorf("%s: %w", customBuildsRBAC, err)
		}
		if u.GetKind() == "ServiceAccount" {
			account = u.GetName()
		}
		if err := b.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("%s: %s %s: %w", customBuildsRBAC, u.GetKind(), u.GetName(), err)
		}
	}
	tok, err := b.Clientset.CoreV1().ServiceAccounts(ns.Name).CreateToken(ctx, account, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(24 * 3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token of %s: %w", account, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bed"] = &clientcmdapi.Cluster{Server: b.Config.Host, CertificateAuthorityData: b.Config.CAData}
	cfg.AuthInfos[account] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["bed"] = &clientcmdapi.Context{Cluster: "bed", AuthInfo: account}
	cfg.CurrentContext = "bed"
	path := filepath.Join(dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}
