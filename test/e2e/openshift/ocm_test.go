package openshift_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/bed"
)

// OCMEnv names an openshift-controller-manager binary
// (hack/openshift-controller-manager.sh builds one): with it,
// TestOpenShiftBuildController runs OpenShift's real build controller.
const OCMEnv = "ARCHWAY_OPENSHIFT_CONTROLLER_MANAGER"

// TestOpenShiftBuildController: OpenShift's own build controller
// (openshift-controller-manager v0.0.0-alpha.0.0.20220106174623-2c2d50dbda3a,
// only openshift.io/build) takes a Custom-strategy Build of four platforms:
// it makes the custom pod, archway builds every platform and pushes the
// index, and the pod exits 0. OpenShift's controller cannot mark the Build
// Complete here: it writes Builds with strategic-merge patches, which a CRD
// refuses.
func TestOpenShiftBuildController(t *testing.T) {
	bin := os.Getenv(OCMEnv)
	if bin == "" {
		t.Skipf("$%s names no openshift-controller-manager binary (hack/openshift-controller-manager.sh builds one)", OCMEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	kube := theBed.Clientset
	// Its controllers' clients are tokens of service accounts of
	// openshift-infra (k8s.io/controller-manager's dynamic client builder).
	// Its leader election lock is in openshift-controller-manager.
	for _, name := range []string{"openshift-infra", "openshift-controller-manager"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "openshift-infra-build-controller"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "openshift-infra", Name: "build-controller"}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	port, err := bed.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// Its health endpoint serves TLS and checks client certificates
	// against a CA: one self-signed certificate for both.
	crt, key, err := cert.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	crtFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(crtFile, crt, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `apiVersion: openshiftcontrolplane.config.openshift.io/v1
kind: OpenShiftControllerManagerConfig
kubeClientConfig:
  kubeConfig: %s
servingInfo:
  bindAddress: 127.0.0.1:%d
  certFile: %s
  keyFile: %s
  clientCA: %s
leaderElection:
  namespace: kube-system
controllers: ["openshift.io/build"]
`, theBed.Kubeconfig, port, crtFile, keyFile, crtFile), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "openshift-controller-manager.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "start", "--config", cfg, "-v", "2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			lines := strings.Split(string(data), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Logf("openshift-controller-manager's log ends:\n%s", strings.Join(lines, "\n"))
		}
	})

	ns, err := theBed.CreateNamespace(ctx, "ocm")
	if err != nil {
		t.Fatal(err)
	}
	// OpenShift's controller takes the push secret from the builder
	// account's docker secrets (its service account controllers make
	// them on a cluster).
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "builder-dockercfg"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)},
	}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{
		ObjectMeta:       metav1.ObjectMeta{Namespace: ns, Name: "builder"},
		Secrets:          []corev1.ObjectReference{{Name: secret.Name}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: secret.Name}},
	}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := customBuild(t, ctx, ns, "hello-1", "FROM "+theBed.BaseImage+"\nRUN uname -m > /machine\n", theBed.Registry.Host+"/"+ns+"/hello:v1")
	// OpenShift's service CA operator injects service-ca.crt into the
	// Build's CA ConfigMap, which the custom pod mounts: play it.
	if err := waitFor(ctx, "OpenShift's controller to make the Build's CA ConfigMap", func() (bool, error) {
		select {
		case err := <-exited:
			exited <- err
			return false, fmt.Errorf("openshift-controller-manager exited: %w", err)
		default:
		}
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, b.GetName()+"-ca", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["service-ca.crt"] = string(crt)
		_, err = kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		return err == nil, client.IgnoreNotFound(err)
	}); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	if err := waitFor(ctx, "the custom pod to end", func() (bool, error) {
		pod, err = kube.CoreV1().Pods(ns).Get(ctx, b.GetName()+"-build", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed), err
	}); err != nil {
		t.Fatal(err)
	}
	log, _ := runner.ContainerLog(pod, "custom-build")
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("the custom pod ended %s, want Succeeded; its log:\n%s", pod.Status.Phase, log)
	}
	// The pod is OpenShift's: made by its CustomBuildStrategy, with its
	// build CA and system-config volumes.
	if c := pod.Spec.Containers[0]; c.Name != "custom-build" || c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("custom pod container = %s %+v, want OpenShift's privileged custom-build", c.Name, c.SecurityContext)
	}
	// OpenShift's controller moves the Build's phase with strategic-merge
	// PATCHes, which the apiserver refuses for a CRD (415): under the
	// bed's stand-in CRD the Build stays New; openshift-apiserver takes them.
	phase, _ := buildPhase(ctx, ns, b.GetName())
	t.Logf("the Build's phase as the CRD keeps it: %q (OpenShift's strategic-merge patches are refused for CRDs)", phase)
	mab, err := multiArchBuild(ctx, ns, b.GetName())
	if err != nil {
		t.Fatal(err)
	}
	if mab.Status.Phase != buildv1.BuildPhaseComplete || len(mab.Status.Platforms) != len(platforms) || mab.Status.Output.To == nil {
		t.Errorf("MultiArchBuild status: phase %s, %d platforms, output %+v; want Complete, %d, the index", mab.Status.Phase, len(mab.Status.Platforms), mab.Status.Output.To, len(platforms))
	}
	for _, p := range platforms {
		if !strings.Contains(log, "["+p+"] ") {
			t.Errorf("the custom pod's log has no line of %s:\n%s", p, log)
		}
	}
	img, err := theBed.Registry.OpenImage(ctx, theBed.Registry.Host+"/"+ns+"/hello:v1")
	if err != nil {
		t.Fatal(err)
	}
	if index, _, err := img.Index(ctx); err != nil || len(index.Manifests) != len(platforms) {
		t.Errorf("the output is not an index of %d platforms: %v", len(platforms), err)
	}
	t.Logf("OpenShift's build controller made the custom pod; archway built every platform in %s", mab.Status.DurationSummary)
}
