package placement

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1alpha1 "github.com/openshift/api/operator/v1alpha1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/registries"
	"github.com/archway-build/archway/test/bed"
)

// overlayRBAC is the RBAC of manifests/openshift as kustomize builds it.
type overlayRBAC struct {
	objects []client.Object
}

// renderOverlayRBAC builds manifests/openshift and keeps its roles and
// bindings.
func renderOverlayRBAC(t *testing.T) *overlayRBAC {
	t.Helper()
	assets, err := bed.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	built, err := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", filepath.Join(bed.RepoRoot(), "manifests", "openshift")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize manifests/openshift: %v", err)
	}
	out := &overlayRBAC{}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(built)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatal(err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		var obj client.Object
		switch meta.Kind {
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "Role":
			obj = &rbacv1.Role{}
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		case "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatal(err)
		}
		out.objects = append(out.objects, obj)
	}
}

// apply creates or replaces every role and binding, with the rule of
// the role named drop (kind/namespace/name) at index dropRule left out
// (-1: none); the test's end deletes them.
func (o *overlayRBAC) apply(t *testing.T, drop string, dropRule int) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{"archway-system", registries.OpenShiftConfigNamespace} {
		if err := ensureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	for _, orig := range o.objects {
		obj := orig.DeepCopyObject().(client.Object)
		key := roleKey(obj)
		if key == drop {
			switch r := obj.(type) {
			case *rbacv1.ClusterRole:
				r.Rules = slices.Delete(r.Rules, dropRule, dropRule+1)
			case *rbacv1.Role:
				r.Rules = slices.Delete(r.Rules, dropRule, dropRule+1)
			}
		}
		existing := obj.DeepCopyObject().(client.Object)
		err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), existing)
		switch {
		case apierrors.IsNotFound(err):
			err = k8s.Create(ctx, obj)
		case err == nil:
			obj.SetResourceVersion(existing.GetResourceVersion())
			err = k8s.Update(ctx, obj)
		}
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	// The placement operator binds the placement controller's ClusterRole
	// while it runs the controller (pkg/placement/operator): bound here as
	// it binds it.
	operand := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: placement.ControllerName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: placement.ControllerName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "archway-system", Name: placement.ControllerName}},
	}
	if err := k8s.Create(ctx, operand); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), operand)
		for _, obj := range o.objects {
			_ = k8s.Delete(context.Background(), obj.DeepCopyObject().(client.Object))
		}
	})
}

// roleKey names a role or binding as kind/namespace/name.
func roleKey(obj client.Object) string {
	kind := "Unknown"
	switch obj.(type) {
	case *rbacv1.ClusterRole:
		kind = "ClusterRole"
	case *rbacv1.Role:
		kind = "Role"
	case *rbacv1.ClusterRoleBinding:
		kind = "ClusterRoleBinding"
	case *rbacv1.RoleBinding:
		kind = "RoleBinding"
	}
	return kind + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

// watchAs runs the registry configuration's watch as a service account
// of archway-system and says whether it became ready within wait, and if
// so, returns its store.
func watchAs(t *testing.T, account string, within time.Duration) (*registries.Store, bool) {
	t.Helper()
	cfg := rest.CopyConfig(testBed.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:archway-system:" + account,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:archway-system", "system:authenticated"},
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	store, err := registries.Setup(mgr, registries.WatchOptions{
		Namespace: "archway-system", ConfigMap: placement.DefaultRegistriesConfigMap,
		RegistryCAConfigMap: placement.DefaultRegistryCAConfigMap, TrustedCAConfigMap: placement.DefaultTrustedCAConfigMap,
		ServiceCAConfigMap: placement.DefaultServiceCAConfigMap, Dir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitCtx, waitCancel := context.WithTimeout(ctx, within)
	defer waitCancel()
	_, err = store.Current(waitCtx)
	return store, err == nil
}

// allowed asks the apiserver whether account (of archway-system) may
// list resource (group, namespace, name as given).
func allowed(t *testing.T, account, group, resource, namespace, name string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "system:serviceaccount:archway-system:" + account,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:archway-system", "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group: group, Resource: resource, Namespace: namespace, Name: name, Verb: "list",
		},
	}}
	if err := k8s.Create(context.Background(), sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// TestOpenShiftRegistriesRBAC: the placement controller's and
// build-controller's service accounts, with the roles manifests/openshift
// ships (and the placement controller's binding its operator makes) and
// nothing else, watch OpenShift's registry settings: the configuration
// becomes ready and follows an ImageContentSourcePolicy and the
// additionalTrustedCA ConfigMap. Without any one rule for those settings,
// once the apiserver says the account is denied, the configuration does
// not become ready in five times the time it took with every rule (at
// least 10 s).
func TestOpenShiftRegistriesRBAC(t *testing.T) {
	ctx := context.Background()
	oc := openShiftClient(t)
	roles := renderOverlayRBAC(t)
	var slowest time.Duration
	for _, account := range []string{placement.ControllerName, "build-controller"} {
		t.Run(account, func(t *testing.T) {
			roles.apply(t, "", -1)
			start := time.Now()
			store, ready := watchAs(t, account, bed.CaseTimeout)
			if !ready {
				t.Fatal("with the overlay's roles, the registry configuration did not become ready")
			}
			slowest = max(slowest, time.Since(start))
			t.Logf("ready as %s in %v", account, time.Since(start).Round(time.Millisecond))
			// An ImageContentSourcePolicy and the additionalTrustedCA
			// ConfigMap reach the configuration.
			policy := &operatorv1alpha1.ImageContentSourcePolicy{ObjectMeta: metav1.ObjectMeta{Name: "rbac-" + account}, Spec: operatorv1alpha1.ImageContentSourcePolicySpec{
				RepositoryDigestMirrors: []operatorv1alpha1.RepositoryDigestMirrors{{Source: "rbac.example.com/team", Mirrors: []string{"mirror.example.com/team"}}},
			}}
			if err := oc.Create(ctx, policy); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = oc.Delete(context.Background(), policy) })
			if err := ensureNamespace(ctx, registries.OpenShiftConfigNamespace); err != nil {
				t.Fatal(err)
			}
			cas := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: registries.OpenShiftConfigNamespace, Name: "rbac-cas"},
				Data: map[string]string{"rbac.example.com": testCA(t)}}
			if err := k8s.Create(ctx, cas); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), cas) })
			img := &configv1.Image{ObjectMeta: metav1.ObjectMeta{Name: registries.ImageConfigName},
				Spec: configv1.ImageSpec{AdditionalTrustedCA: configv1.ConfigMapNameReference{Name: cas.Name}}}
			if err := oc.Create(ctx, img); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = oc.Delete(context.Background(), img) })
			err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, bed.CaseTimeout, true, func(ctx context.Context) (bool, error) {
				s, err := store.Current(ctx)
				if err != nil {
					return false, err
				}
				reg, err := s.Registry("rbac.example.com/team/app")
				return err == nil && reg != nil && len(reg.Mirrors) == 1 && s.Conf.RegistryCAs["rbac.example.com"] != nil, nil
			})
			if err != nil {
				t.Errorf("the configuration watched as %s never had the policy's mirror and the additionalTrustedCA: %v", account, err)
			}
		})
	}
	if t.Failed() {
		return
	}
	window := max(10*time.Second, 5*slowest)
	// Each rule for OpenShift's settings, taken away in turn.
	for _, obj := range roles.objects {
		var rules []rbacv1.PolicyRule
		switch r := obj.(type) {
		case *rbacv1.ClusterRole:
			rules = r.Rules
		case *rbacv1.Role:
			rules = r.Rules
		}
		for i, rule := range rules {
			openShift := slices.Contains(rule.Resources, "imagecontentsourcepolicies") || slices.Contains(rule.Resources, "images") ||
				obj.GetNamespace() == registries.OpenShiftConfigNamespace
			if !openShift {
				continue
			}
			accounts := []string{placement.ControllerName}
			switch {
			case obj.GetNamespace() == registries.OpenShiftConfigNamespace:
				accounts = []string{placement.ControllerName, "build-controller"}
			case strings.Contains(obj.GetName(), "build-controller"):
				accounts = []string{"build-controller"}
			}
			name := roleKey(obj) + " " + strings.Join(rule.Resources, ",")
			for _, account := range accounts {
				t.Run("without "+name+" as "+account, func(t *testing.T) {
					roles.apply(t, roleKey(obj), i)
					var resourceName string
					if len(rule.ResourceNames) > 0 {
						resourceName = rule.ResourceNames[0]
					}
					// The positive signal: the apiserver denies it now.
					err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, bed.LongTimeout, true, func(context.Context) (bool, error) {
						return !allowed(t, account, rule.APIGroups[0], rule.Resources[0], obj.GetNamespace(), resourceName), nil
					})
					if err != nil {
						t.Fatalf("%s may still list %s without the rule", account, rule.Resources[0])
					}
					if _, ready := watchAs(t, account, window); ready {
						t.Errorf("without %s the registry configuration watched as %s became ready: the rule is not needed", name, account)
					}
				})
			}
		}
	}
}

// testCA is a CA certificate as PEM.
func testCA(t *testing.T) string {
	t.Helper()
	ca, _, _ := testTLS(t)
	return string(ca)
}
