package e2e

import (
	"context"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/registries"
	"github.com/archway-build/archway/test/bed"
)

// TestBuildsTrustOpenShiftRegistryCAs: on OpenShift (the bed serves the
// image config with openshift/api's CRDs) a registry serves TLS with a
// certificate of a CA the build pods do not know. A two-platform Build
// whose base and output are there fails on the certificate; once the
// image config's additionalTrustedCA names a ConfigMap of openshift-config
// holding the CA under the registry's host..port, the next Build pulls its
// base, pushes each platform and the manifest list there and completes;
// with that CA gone and the registry named the internal registry
// (status.internalRegistryHostname) whose service CA is in
// archway-service-ca, the next Build completes too.
func TestBuildsTrustOpenShiftRegistryCAs(t *testing.T) {
	ctx := t.Context()
	ip := bed.NonLoopbackIP()
	if ip == nil {
		t.Skip("the machine has no IPv4 address but loopback, where the builder skips TLS checks")
	}
	if err := env.Bed.InstallOpenShiftRegistryCRDs(); err != nil {
		t.Fatal(err)
	}
	// build-controller discovers OpenShift's kinds when it starts.
	if err := env.RestartControllerWithBuildConfig(ctx, ""); err != nil {
		t.Fatal(err)
	}
	caPEM, certPEM, keyPEM, err := bed.ServingCert(ip)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := env.Bed.StartRegistry(ctx, "openshift-ca-registry", bed.RegistryOptions{TLSCert: certPEM, TLSKey: keyPEM, TLSCA: caPEM, Address: ip.String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	base := reg.Host + "/ocp/base:1"
	if err := reg.CopyIndex(ctx, env.Bed.BaseImage, base, nil); err != nil {
		t.Fatal(err)
	}
	oc := imageConfigClient(t)
	if err := env.Bed.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: registries.OpenShiftConfigNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	img := &configv1.Image{ObjectMeta: metav1.ObjectMeta{Name: registries.ImageConfigName}}
	if err := oc.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = oc.Delete(ctx, img)
		for _, cm := range []types.NamespacedName{{Namespace: registries.OpenShiftConfigNamespace, Name: "registry-cas"}, {Namespace: metav1.NamespaceDefault, Name: placement.DefaultServiceCAConfigMap}} {
			_ = env.Bed.Client.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}})
		}
	})
	build := func(t *testing.T, prefix string) *buildv1.Build {
		h := newHarness(t, prefix)
		bc := h.buildConfigSpec("FROM "+base+"\nENV TRUSTED=yes\n", []string{"linux/amd64", "linux/arm64"}, nil)
		bc.Spec.Output.To.Name = reg.Host + "/" + h.repo + ":v1"
		h.create(bc)
		h.startBuild()
		b := h.waitTerminal()
		if b.Status.Phase == buildv1.BuildPhaseComplete {
			if _, err := reg.ManifestDigest(ctx, h.repo, "v1"); err != nil {
				t.Errorf("the index is not in the registry of the private CA: %v", err)
			}
		}
		return b
	}
	complete := func(t *testing.T, b *buildv1.Build) {
		t.Helper()
		if b.Status.Phase != buildv1.BuildPhaseComplete {
			t.Fatalf("Build %s: %s (%s) %s; platforms %+v", b.Name, b.Status.Phase, b.Status.Reason, b.Status.Message, b.Status.Platforms)
		}
	}

	t.Run("without the CA the pull fails on the certificate", func(t *testing.T) {
		b := build(t, "ocp-untrusted")
		var said string
		for _, e := range b.Status.Platforms {
			said += e.Message + e.LogSnippet
		}
		if b.Status.Phase == buildv1.BuildPhaseComplete || !strings.Contains(said, "certificate signed by unknown authority") {
			t.Fatalf("Build %s: %s, platforms %+v: want a failure naming the certificate", b.Name, b.Status.Phase, b.Status.Platforms)
		}
	})
	t.Run("the image config's additionalTrustedCA", func(t *testing.T) {
		host, port, _ := strings.Cut(reg.Host, ":")
		writeConfigMap(t, ctx, registries.OpenShiftConfigNamespace, "registry-cas", map[string]string{host + ".." + port: string(caPEM)})
		img.Spec.AdditionalTrustedCA.Name = "registry-cas"
		if err := oc.Update(ctx, img); err != nil {
			t.Fatal(err)
		}
		waitRegistriesApplied(t, ctx, metav1.NamespaceDefault, "Image", img.Name, img.ResourceVersion)
		complete(t, build(t, "ocp-additional-ca"))
	})
	t.Run("the internal registry's service CA", func(t *testing.T) {
		writeConfigMap(t, ctx, metav1.NamespaceDefault, placement.DefaultServiceCAConfigMap, map[string]string{registries.ServiceCAKey: string(caPEM)})
		img.Spec.AdditionalTrustedCA.Name = ""
		if err := oc.Update(ctx, img); err != nil {
			t.Fatal(err)
		}
		img.Status.InternalRegistryHostname = reg.Host
		if err := oc.Status().Update(ctx, img); err != nil {
			t.Fatal(err)
		}
		waitRegistriesApplied(t, ctx, metav1.NamespaceDefault, "Image", img.Name, img.ResourceVersion)
		complete(t, build(t, "ocp-service-ca"))
	})
}

// imageConfigClient is a client that knows OpenShift's image config.
func imageConfigClient(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := configv1.Install(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Bed.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
