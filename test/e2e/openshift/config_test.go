package openshift_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/custom"
	"github.com/archway-build/archway/test/bed"
	e2e "github.com/archway-build/archway/test/e2e/framework"
)

// configMapName is the generated name of build-controller's configuration
// as manifests/openshift-builds installs it (build-controller-config-<hash>).
var configMapName string

// installConfig creates the objects of manifests/openshift-builds every
// custom pod needs.
func installConfig(ctx context.Context) (err error) {
	configMapName, err = e2e.InstallCustomBuilderConfig(ctx, theBed.Client)
	return err
}

func setConfig(t *testing.T, ctx context.Context, file string) {
	t.Helper()
	cms := theBed.Clientset.CoreV1().ConfigMaps(custom.ConfigNamespace)
	cm, err := cms.Get(ctx, configMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orig := cm.Data[custom.ConfigKey]
	cm.Data[custom.ConfigKey] = file
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cm, err := cms.Get(context.Background(), configMapName, metav1.GetOptions{})
		if err == nil {
			cm.Data[custom.ConfigKey] = orig
			_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("restoring build-controller's configuration: %v", err)
		}
	})
}

// builderAccount makes namespace ns's builder service account what an
// administrator makes it for archway's custom builds
// (docs/admin-guide/openshift-builds.md): bound to archway-custom-builder
// and archway-custom-builder-nodes and, with readConfig, to the Role that
// reads build-controller's configuration. It returns a kubeconfig of that
// account, which a custom pod given it in KUBECONFIG talks to the
// apiserver as (on the bed the pods otherwise run as the bed's admin), and
// a client of it.
func builderAccount(t *testing.T, ctx context.Context, ns string, readConfig bool) (string, kubernetes.Interface) {
	t.Helper()
	kube := theBed.Clientset
	account := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "builder", Namespace: ns}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "archway-custom-builder"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "archway-custom-builder"},
		Subjects:   []rbacv1.Subject{account},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "archway-custom-builder-nodes-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "archway-custom-builder-nodes"},
		Subjects:   []rbacv1.Subject{account},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	if readConfig {
		rb, err := kube.RbacV1().RoleBindings(custom.ConfigNamespace).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: custom.ConfigRole + "-" + ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: custom.ConfigRole},
			Subjects:   []rbacv1.Subject{account},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = kube.RbacV1().RoleBindings(custom.ConfigNamespace).Delete(context.Background(), rb.Name, metav1.DeleteOptions{})
		})
	}
	tok, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "builder", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bed"] = &clientcmdapi.Cluster{Server: theBed.Config.Host, CertificateAuthorityData: theBed.Config.CAData}
	cfg.AuthInfos["builder"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["builder"] = &clientcmdapi.Context{Cluster: "bed", AuthInfo: "builder"}
	cfg.CurrentContext = "builder"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Beside the pods' kubeconfig, where the pods can read it.
	path := filepath.Join(filepath.Dir(theBed.Kubeconfig), ns+"-builder-kubeconfig")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return path, client
}

// The configuration TestCustomBuildsApplyBuildControllersConfiguration
// sets: a default and an override of every build pod's metadata, a
// default of its resources, and a builder image the custom builds do not
// run (theirs is the one OpenShift runs the custom pod from).
const testConfig = `apiVersion: config.archway.dev/v1alpha1
kind: BuildControllerConfiguration
build:
  builderImage: quay.io/archway/builder:from-the-configuration
  buildDefaults:
    labels: {example.com/default-label: from-the-configuration}
    resources: {requests: {cpu: 123m}}
  buildOverrides:
    annotations: {example.com/override-annotation: from-the-configuration}
`

// TestCustomBuildsApplyBuildControllersConfiguration: the custom pod,
// running as the Build's service account with the roles an administrator
// binds (archway-custom-builder, archway-custom-builder-nodes and
// archway-custom-builder-config), reads build-controller's configuration
// from archway's namespace and makes every platform's pod and the
// manifest-list pod with its defaults and overrides, as build-controller
// makes them; the Build completes. The account may read the configuration
// and change none of it.
func TestCustomBuildsApplyBuildControllersConfiguration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns, err := theBed.CreateNamespace(ctx, "ocp-config")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, asBuilder := builderAccount(t, ctx, ns, true)
	setConfig(t, ctx, testConfig)
	two := []string{"linux/amd64", "linux/arm64"}
	b := customBuildWithEnv(t, ctx, ns, "config-1", "FROM "+theBed.BaseImage+"\nENV X=1\n", theBed.Registry.Host+"/"+ns+"/app:v1", two,
		map[string]any{"name": "KUBECONFIG", "value": kubeconfig})
	pods := map[string]*corev1.Pod{}
	if err := waitFor(ctx, "the Build to end", func() (bool, error) {
		list, err := theBed.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			if p := &list.Items[i]; p.Name != b.GetName()+"-build" {
				pods[p.Name] = p
			}
		}
		phase, err := buildPhase(ctx, ns, b.GetName())
		return phase == "Complete" || phase == "Failed" || phase == "Error" || phase == "Cancelled", err
	}); err != nil {
		t.Fatal(err)
	}
	log, _ := podLog(ctx, ns, b.GetName()+"-build")
	if phase, _ := buildPhase(ctx, ns, b.GetName()); phase != "Complete" {
		t.Fatalf("Build phase = %s, want Complete; the custom pod's log:\n%s", phase, log)
	}
	want := map[string]bool{buildv1.ManifestListPodName(b.GetName()): true}
	for _, p := range two {
		want[buildv1.PlatformPodName(b.GetName(), p)] = true
	}
	for name := range want {
		pod := pods[name]
		if pod == nil {
			t.Errorf("no pod %s was made (pods %v)", name, keys(pods))
			continue
		}
		if got := pod.Labels["example.com/default-label"]; got != "from-the-configuration" {
			t.Errorf("pod %s: label example.com/default-label = %q, want the configuration's default", name, got)
		}
		if got := pod.Annotations["example.com/override-annotation"]; got != "from-the-configuration" {
			t.Errorf("pod %s: annotation example.com/override-annotation = %q, want the configuration's override", name, got)
		}
		c := pod.Spec.Containers[0]
		// The build's resources are the platforms' pods' (build-controller
		// gives the manifest-list pod its own).
		if got := c.Resources.Requests.Cpu().String(); got != "123m" && name != buildv1.ManifestListPodName(b.GetName()) {
			t.Errorf("pod %s: cpu request %s, want the configuration's default 123m", name, got)
		}
		if c.Image != builderImage {
			t.Errorf("pod %s runs %s, want the custom pod's image %s", name, c.Image, builderImage)
		}
		if pod.Spec.ServiceAccountName != "builder" {
			t.Errorf("pod %s runs as %s, want the Build's service account builder", name, pod.Spec.ServiceAccountName)
		}
	}
	// The account reads the configuration and changes none of it.
	patch := []byte(`{"metadata":{"labels":{"tenant":"was-here"}}}`)
	if _, err := asBuilder.CoreV1().ConfigMaps(custom.ConfigNamespace).Patch(ctx, configMapName, types.MergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the Build's account patching the configuration: %v, want Forbidden", err)
	}
	if _, err := asBuilder.RbacV1().Roles(custom.ConfigNamespace).Patch(ctx, custom.ConfigRole, types.MergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the Build's account patching the Role that names the configuration: %v, want Forbidden", err)
	}
	if _, err := asBuilder.CoreV1().ConfigMaps(custom.ConfigNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "build-controller-config-evil"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the Build's account creating a ConfigMap in archway's namespace: %v, want Forbidden", err)
	}
}

// TestCustomBuildsNeedBuildControllersConfiguration: a custom pod whose
// service account may not read build-controller's configuration (the
// Role archway-custom-builder-config not bound to it) refuses to build,
// saying what to bind; it never builds with built-in defaults.
func TestCustomBuildsNeedBuildControllersConfiguration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	ns, err := theBed.CreateNamespace(ctx, "ocp-noconfig")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, _ := builderAccount(t, ctx, ns, false)
	b := customBuildWithEnv(t, ctx, ns, "noconfig-1", "FROM "+theBed.BaseImage+"\nENV X=1\n", theBed.Registry.Host+"/"+ns+"/app:v1",
		[]string{"linux/amd64", "linux/arm64"}, map[string]any{"name": "KUBECONFIG", "value": kubeconfig})
	if phase := waitEnd(t, ctx, ns, b.GetName()); phase != "Failed" {
		t.Fatalf("Build phase = %s, want Failed", phase)
	}
	log, err := podLog(ctx, ns, b.GetName()+"-build")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"reading build-controller's configuration",
		"forbidden",
		fmt.Sprintf("oc -n archway-system create rolebinding archway-custom-builder-config-%s --role=archway-custom-builder-config --serviceaccount=%s:builder", ns, ns),
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the custom pod's log does not say %q:\n%s", want, log)
		}
	}
	pods, err := theBed.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Name != b.GetName()+"-build" {
			t.Errorf("pod %s was made: nothing is built without the configuration", p.Name)
		}
	}
	if _, err := multiArchBuild(ctx, ns, b.GetName()); !apierrors.IsNotFound(err) {
		t.Errorf("MultiArchBuild: %v, want none made", err)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
