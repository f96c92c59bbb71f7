package bed

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// startAPIServer starts etcd and kube-apiserver with envtest, installs the
// CRDs and writes an admin kubeconfig.
func (b *Bed) startAPIServer(opts Options) error {
	assets, err := AssetsDir()
	if err != nil {
		return err
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := Tool(name); err != nil {
			return err
		}
	}
	crds := opts.CRDDirectoryPaths
	if crds == nil {
		if dir := filepath.Join(repoRoot(), "manifests", "crd", "bases"); dirExists(dir) {
			crds = []string{dir}
		}
	}
	b.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crds,
		ErrorIfCRDPathMissing: true,
		Scheme:                NewScheme(),
	}
	// A busy 2-core machine can take a while; envtest's defaults are 20 s.
	b.env.ControlPlane.GetAPIServer().StartTimeout = 2 * time.Minute
	b.env.ControlPlane.Etcd = &envtest.Etcd{StartTimeout: time.Minute}
	// envtest runs no kube-controller-manager: without these plugins' owners,
	// pods wait for service-account tokens and nodes stay tainted not-ready.
	b.env.ControlPlane.GetAPIServer().Configure().
		Append("disable-admission-plugins", "ServiceAccount", "TaintNodesByCondition").
		// Pod Security admission as archway ships it for clusters whose
		// build namespaces enforce baseline.
		Append("enable-admission-plugins", "PodSecurity").
		// No kube-proxy makes Services' cluster IPs reachable: the apiserver
		// calls a webhook (or aggregated API) of a Service at one of its
		// endpoints (pod IPs, from kube-controller-manager's endpoint
		// controllers), as clusters without a proxy on their control plane do.
		Set("enable-aggregator-routing", "true")
	// Aggregated APIs: the apiserver proxies to them with a front-proxy
	// client certificate and publishes its CA, as clusters do.
	if err := b.configureFrontProxy(filepath.Join(b.Dir, "front-proxy")); err != nil {
		return fmt.Errorf("front-proxy certificates: %w", err)
	}
	if b.Node != nil {
		if err := b.serveForRealNode(); err != nil {
			return err
		}
	}
	if cfg := filepath.Join(repoRoot(), "manifests", "podsecurity", "admission-configuration.yaml"); fileExists(cfg) {
		b.env.ControlPlane.GetAPIServer().Configure().Append("admission-control-config-file", cfg)
	}
	if opts.OwnerReferencesPermissionEnforcement {
		b.env.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	}
	if opts.AuditServiceAccounts {
		policy := filepath.Join(b.Dir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
			return err
		}
		b.AuditLogPath = filepath.Join(b.Dir, "audit.log")
		b.env.ControlPlane.GetAPIServer().Configure().
			Set("audit-policy-file", policy).
			Set("audit-log-path", b.AuditLogPath).
			// Each event is written by the request's handler, not queued.
			Set("audit-log-mode", "blocking").
			Set("audit-log-format", "json")
	}
	cfg, err := b.env.Start()
	if err != nil {
		return fmt.Errorf("%w (binaries from %s; `make tools` builds them)", err, assets)
	}
	// Many controllers and test goroutines share this config.
	cfg.QPS, cfg.Burst = 500, 1000
	b.Config = cfg

	user, err := b.env.ControlPlane.AddUser(envtest.User{Name: "bed-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("creating the bed's admin user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	b.Kubeconfig = filepath.Join(b.Dir, "kubeconfig")
	if err := os.WriteFile(b.Kubeconfig, kubeconfig, 0o600); err != nil {
		return err
	}
	if b.Client, err = client.New(cfg, client.Options{Scheme: NewScheme()}); err != nil {
		return err
	}
	if b.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	return nil
}

// serveForRealNode makes the apiserver serve on the real node's address, so
// that its pods reach it (through the kubernetes Service's cluster IP, which
// kube-proxy leads there), with a certificate naming that address and the
// cluster IP, and turns the ServiceAccount admission plugin back on: real
// pods get their token volume from it (kube-controller-manager makes the
// service accounts and the root CA ConfigMap it needs).
func (b *Bed) serveForRealNode() error {
	api := b.env.ControlPlane.GetAPIServer()
	api.CertDir = filepath.Join(b.Dir, "apiserver-certs")
	ca, err := writeAPIServerCerts(api.CertDir, b.Node.IP)
	if err != nil {
		return fmt.Errorf("apiserver certificate: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	api.SecureServing.Address = b.Node.IP
	api.SecureServing.Port = strconv.Itoa(port)
	api.SecureServing.CA = ca
	logFile, err := os.Create(b.LogPath("kube-apiserver"))
	if err != nil {
		return err
	}
	api.Out, api.Err = logFile, logFile
	api.Configure().Set("disable-admission-plugins", "TaintNodesByCondition").
		// The kubelet's hostname resolves nowhere; its address does.
		Set("kubelet-preferred-address-types", "InternalIP")
	return nil
}

// auditPolicy logs the metadata of service accounts' requests (user, verb,
// resource, name, response code) once each has been answered (a watch also
// when it starts).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
`

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

func dirExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
