package bed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OpenShiftAPIServerEnv names an openshift-apiserver binary
// (hack/openshift.sh builds one); without it the tests that need
// OpenShift's own API server skip.
const OpenShiftAPIServerEnv = "ARCHWAY_OPENSHIFT_APISERVER"

// openShiftAPIGroups are the groups of openshift-apiserver the bed
// registers with its apiserver: builds, the image streams OpenShift's
// build controller and the build API read, and the DeploymentConfigs its
// image trigger controller watches beside BuildConfigs.
var openShiftAPIGroups = []string{"build.openshift.io", "image.openshift.io", "apps.openshift.io"}

// openShiftCRDs are the CRDs of openshift/api whose informers
// openshift-apiserver and OpenShift's build controller wait for (on a
// cluster the config operators install them).
var openShiftCRDs = []string{
	"config/v1/zz_generated.crd-manifests/*_01_proxies.crd.yaml",
	"operator/v1alpha1/zz_generated.crd-manifests/*_01_imagecontentsourcepolicies.crd.yaml",
	"config/v1/zz_generated.crd-manifests/*_01_images.crd.yaml",
	"config/v1/zz_generated.crd-manifests/*_01_projects.crd.yaml",
	"config/v1/zz_generated.crd-manifests/*_01_builds.crd.yaml",
	"config/v1/zz_generated.crd-manifests/*_01_ingresses.crd.yaml",
	"config/v1/zz_generated.crd-manifests/*_01_networks.crd.yaml",
	"config/v1/zz_generated.crd-manifests/*_01_clusterversions-Default.crd.yaml",
	"quota/v1/zz_generated.crd-manifests/*.crd.yaml",
	"security/v1/zz_generated.crd-manifests/*.crd.yaml",
	"authorization/v1/zz_generated.crd-manifests/*.crd.yaml",
}

// OpenShiftAPIServer is OpenShift's own API server run beside the bed's
// apiserver as on a cluster: it stores OpenShift's resources in the bed's
// etcd under its own prefix, authenticates and authorizes by delegation to
// the bed's apiserver, and serves build.openshift.io and image.openshift.io
// through APIServices, with every subresource OpenShift has (builds/log,
// buildconfigs/instantiate, ...), strategic-merge patches and OpenShift's
// admission. The bed's registry is its internal registry.
type OpenShiftAPIServer struct {
	// Addr is its host:port.
	Addr string
	// CA trusts its serving certificate.
	CA []byte
	// LogPath is its log.
	LogPath string
}

// StartOpenShiftAPIServer starts binary (an openshift-apiserver) and
// registers its groups; it returns once discovery of the bed's apiserver
// lists them. It needs the bed's front proxy (every bed has it).
func (b *Bed) StartOpenShiftAPIServer(ctx context.Context, binary string) (*OpenShiftAPIServer, error) {
	if err := b.installOpenShiftCRDs(openShiftCRDs...); err != nil {
		return nil, err
	}
	// Image imports read the cluster's image config, which a cluster
	// always has.
	imageConfig := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "config.openshift.io/v1", "kind": "Image",
		"metadata": map[string]any{"name": "cluster"}, "spec": map[string]any{},
	}}
	if err := b.Client.Create(ctx, imageConfig); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the cluster's image config: %w", err)
	}
	dir := filepath.Join(b.Dir, "openshift-apiserver")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ip, err := b.ServiceAddress()
	if err != nil {
		return nil, err
	}
	port, err := freePortOn(ip)
	if err != nil {
		return nil, err
	}
	const host = "api.openshift-apiserver.svc"
	crt, key, err := cert.GenerateSelfSignedCertKey(host, []net.IP{net.ParseIP(ip)}, []string{host})
	if err != nil {
		return nil, err
	}
	// Its configuration defaults etcd's client certificate to a cluster's
	// path; the bed's etcd serves plain HTTP on loopback and asks for
	// none, so any certificate will do.
	for name, data := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	// The bed's registry stands for the cluster's internal one: image
	// streams' dockerImageRepository names it, and OpenShift's build
	// controller resolves an ImageStreamTag output to it.
	var internalRegistry string
	if b.Registry != nil {
		internalRegistry = b.Registry.Host
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `apiVersion: openshiftcontrolplane.config.openshift.io/v1
kind: OpenShiftAPIServerConfig
servingInfo:
  bindAddress: %s
  certFile: tls.crt
  keyFile: tls.key
storageConfig:
  urls: [%s]
  storagePrefix: openshift.io
  certFile: tls.crt
  keyFile: tls.key
  ca: tls.crt
kubeClientConfig:
  kubeConfig: %s
imagePolicyConfig:
  internalRegistryHostname: %q
`, net.JoinHostPort(ip, strconv.Itoa(port)), b.env.ControlPlane.Etcd.URL.String(), b.Kubeconfig, internalRegistry), 0o600); err != nil {
		return nil, err
	}
	p, err := startProcess("openshift-apiserver", b.Dir, binary, []string{
		"start", "--config", cfg,
		"--authentication-kubeconfig", b.Kubeconfig,
		"--authorization-kubeconfig", b.Kubeconfig,
		"-v", "2",
	}, nil)
	if err != nil {
		return nil, err
	}
	p.addr = net.JoinHostPort(ip, strconv.Itoa(port))
	b.procs = append(b.procs, p)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(crt)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: host}}}
	startCtx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	if err := waitFor(startCtx, p, "openshift-apiserver to be ready", func(ctx context.Context) error {
		return answersOK(ctx, hc, "https://"+p.addr+"/readyz")
	}); err != nil {
		return nil, err
	}
	if err := b.registerOpenShiftAPIs(startCtx, p, ip, port, crt); err != nil {
		return nil, err
	}
	return &OpenShiftAPIServer{Addr: p.addr, CA: crt, LogPath: p.logPath}, nil
}

// registerOpenShiftAPIs makes the bed's apiserver proxy OpenShift's groups
// to the server at ip:port, as a cluster's APIServices of the
// openshift-apiserver Service do, and waits until discovery lists them.
func (b *Bed) registerOpenShiftAPIs(ctx context.Context, p *process, ip string, port int, ca []byte) error {
	const ns, svc = "openshift-apiserver", "api"
	c := b.Client
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(port))}}},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-bed",
				Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
		},
	}
	for _, group := range openShiftAPIGroups {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1",
			"kind":       "APIService",
			"metadata":   map[string]any{"name": "v1." + group},
			"spec": map[string]any{
				"group": group, "version": "v1",
				"service":              map[string]any{"namespace": ns, "name": svc, "port": int64(443)},
				"caBundle":             base64.StdEncoding.EncodeToString(ca),
				"groupPriorityMinimum": int64(9900), "versionPriority": int64(15),
			},
		}})
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return waitFor(ctx, p, "discovery to list OpenShift's groups", func(context.Context) error {
		for _, group := range openShiftAPIGroups {
			if _, err := b.Clientset.Discovery().ServerResourcesForGroupVersion(group + "/v1"); err != nil {
				return err
			}
		}
		return nil
	})
}

// freePortOn returns a TCP port on ip that nothing listens on now.
func freePortOn(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// OpenShiftControllerManagerEnv names an openshift-controller-manager
// binary (hack/openshift.sh builds one).
const OpenShiftControllerManagerEnv = "ARCHWAY_OPENSHIFT_CONTROLLER_MANAGER"

// StartOpenShiftControllerManager starts binary (an
// openshift-controller-manager) with OpenShift's build controller
// (openshift.io/build) and image trigger controller
// (openshift.io/image-trigger) against the bed's apiserver, as a cluster
// runs them: their clients are tokens of service accounts of
// openshift-infra (the bed binds those accounts to cluster-admin)
// and its leader lock is in kube-system. It returns once the process
// serves its health endpoint; its log is LogPath.
func (b *Bed) StartOpenShiftControllerManager(ctx context.Context, binary string) (logPath string, err error) {
	for _, name := range []string{"openshift-infra", "openshift-controller-manager"} {
		if err := b.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	// The service CA as a cluster's service CA operator publishes it for
	// the build controller, which copies it into every Build's <build>-ca
	// ConfigMap (the custom pod mounts that key): on the bed, the
	// apiserver's CA.
	serviceCA := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "openshift-controller-manager", Name: "openshift-service-ca"},
		Data:       map[string]string{"service-ca.crt": string(b.Config.CAData)},
	}
	if err := b.Client.Create(ctx, serviceCA); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "openshift-infra-controllers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:openshift-infra"}},
	}
	if err := b.Client.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	dir := filepath.Join(b.Dir, "openshift-controller-manager")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	// Its health endpoint serves TLS and checks client certificates
	// against a CA: one self-signed certificate for both.
	crt, key, err := cert.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return "", err
	}
	for name, data := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", err
		}
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `apiVersion: openshiftcontrolplane.config.openshift.io/v1
kind: OpenShiftControllerManagerConfig
kubeClientConfig:
  kubeConfig: %s
servingInfo:
  bindAddress: 127.0.0.1:%d
  certFile: tls.crt
  keyFile: tls.key
  clientCA: tls.crt
leaderElection:
  namespace: kube-system
controllers: ["openshift.io/build", "openshift.io/image-trigger"]
`, b.Kubeconfig, port), 0o600); err != nil {
		return "", err
	}
	p, err := startProcess("openshift-controller-manager", b.Dir, binary, []string{"start", "--config", cfg, "-v", "2"}, nil)
	if err != nil {
		return "", err
	}
	p.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	b.procs = append(b.procs, p)
	startCtx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	return p.logPath, waitFor(startCtx, p, "openshift-controller-manager to serve", func(context.Context) error {
		conn, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}
