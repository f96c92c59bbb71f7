package placement

import (
	"context"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1alpha1 "github.com/openshift/api/operator/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/registries"
	"github.com/archway-build/archway/test/bed"
)

// OpenShift's registry settings on the bed, with the CRDs of
// github.com/openshift/api (bed.Bed.InstallOpenShiftRegistryCRDs): each source changes
// what placement's inspection reaches, as it changes what an OpenShift
// node pulls.

// openShiftClient is a client that knows OpenShift's config and operator
// types.
func openShiftClient(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{configv1.Install, operatorv1alpha1.Install, corev1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(testBed.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// imageConfig writes image.config.openshift.io/cluster (spec, then status
// when internalRegistry is set) and waits until the controller applied
// that version; the test's end deletes it.
func (rc *registryConfig) imageConfig(oc client.Client, spec configv1.ImageSpec, internalRegistry string) *configv1.Image {
	rc.t.Helper()
	img := &configv1.Image{ObjectMeta: metav1.ObjectMeta{Name: registries.ImageConfigName}}
	err := oc.Get(rc.ctx, client.ObjectKeyFromObject(img), img)
	switch {
	case apierrors.IsNotFound(err):
		img.Spec = spec
		err = oc.Create(rc.ctx, img)
		rc.t.Cleanup(func() { rc.removeImageConfig(oc) })
	case err == nil:
		img.Spec = spec
		err = oc.Update(rc.ctx, img)
	}
	if err != nil {
		rc.t.Fatalf("writing the image config: %v", err)
	}
	if internalRegistry != "" {
		img.Status.InternalRegistryHostname = internalRegistry
		if err := oc.Status().Update(rc.ctx, img); err != nil {
			rc.t.Fatalf("writing the image config's status: %v", err)
		}
	}
	rc.waitEvent(metav1.NamespaceDefault, "Image", img.Name, registries.EventConfigurationApplied, "resourceVersion "+img.ResourceVersion+")")
	return img
}

// removeImageConfig empties the image config, waits until the controller
// applied that (so that the next test starts without it), and deletes it.
func (rc *registryConfig) removeImageConfig(oc client.Client) {
	img := &configv1.Image{}
	if err := oc.Get(context.Background(), types.NamespacedName{Name: registries.ImageConfigName}, img); err != nil {
		return
	}
	img.Spec = configv1.ImageSpec{}
	err := oc.Update(context.Background(), img)
	if err == nil {
		img.Status = configv1.ImageStatus{}
		err = oc.Status().Update(context.Background(), img)
	}
	if err != nil {
		rc.t.Errorf("emptying the image config: %v", err)
	} else {
		rc.waitEvent(metav1.NamespaceDefault, "Image", img.Name, registries.EventConfigurationApplied, "resourceVersion "+img.ResourceVersion+")")
	}
	_ = oc.Delete(context.Background(), img)
}

// configMapIn creates or replaces a ConfigMap of any namespace, removed
// at the test's end, and returns its resourceVersion.
func (rc *registryConfig) configMapIn(ns, name string, data map[string]string) string {
	rc.t.Helper()
	if err := ensureNamespace(rc.ctx, ns); err != nil {
		rc.t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	err := k8s.Get(rc.ctx, client.ObjectKeyFromObject(cm), cm)
	switch {
	case apierrors.IsNotFound(err):
		cm.Data = data
		err = k8s.Create(rc.ctx, cm)
		rc.t.Cleanup(func() {
			_ = k8s.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		})
	case err == nil:
		cm.Data = data
		err = k8s.Update(rc.ctx, cm)
	}
	if err != nil {
		rc.t.Fatalf("writing ConfigMap %s/%s: %v", ns, name, err)
	}
	return cm.ResourceVersion
}

// TestImageContentSourcePolicy: an ImageContentSourcePolicy's mirror
// serves digest references of its source (a closed port), and not tags,
// as on an OpenShift node. A policy containers/image could not use is
// refused with an event naming it, and the previous configuration stays.
func TestImageContentSourcePolicy(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	ctx := context.Background()
	oc := openShiftClient(t)
	mirror, dgst := startMirror(ctx, t, "icsp-registry", "arm64", "ppc64le")
	source := closedPortRegistry(t)
	rc := newRegistryConfig(t)
	// The mirror is plain HTTP: said in the image config, as on OpenShift.
	rc.imageConfig(oc, configv1.ImageSpec{RegistrySources: configv1.RegistrySources{InsecureRegistries: []string{mirror.Host}}}, "")
	h := newHarness(t, "icsp", nil)
	h.create(makePod(h.ns, "before").image(source + "/icsp/app@" + dgst).obj())
	expectInspectionError(h, "before", "connection refused")

	policy := &operatorv1alpha1.ImageContentSourcePolicy{ObjectMeta: metav1.ObjectMeta{Name: "test-icsp"}, Spec: operatorv1alpha1.ImageContentSourcePolicySpec{
		RepositoryDigestMirrors: []operatorv1alpha1.RepositoryDigestMirrors{{Source: source + "/icsp", Mirrors: []string{mirror.Host + "/mirrored"}}},
	}}
	if err := oc.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = oc.Delete(context.Background(), policy) })
	rc.waitEvent(metav1.NamespaceDefault, "ImageContentSourcePolicy", policy.Name, registries.EventConfigurationApplied, "resourceVersion "+policy.ResourceVersion+")")
	h.create(makePod(h.ns, "by-digest").image(source + "/icsp/app@" + dgst).obj())
	h.create(makePod(h.ns, "by-tag").image(source + "/icsp/app:1").obj())
	expectPlaced(h, "by-digest", "arm64", "ppc64le")
	expectInspectionError(h, "by-tag", "connection refused")

	// A source with a tag (the CRD checks nothing): refused, naming the
	// policy and the field; the mirror stays for the next pod.
	bad := &operatorv1alpha1.ImageContentSourcePolicy{ObjectMeta: metav1.ObjectMeta{Name: "test-icsp-bad"}, Spec: operatorv1alpha1.ImageContentSourcePolicySpec{
		RepositoryDigestMirrors: []operatorv1alpha1.RepositoryDigestMirrors{{Source: source + "/icsp/app:1", Mirrors: []string{mirror.Host + "/mirrored"}}},
	}}
	if err := oc.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = oc.Delete(context.Background(), bad) })
	note := rc.waitEvent(metav1.NamespaceDefault, "ImageContentSourcePolicy", bad.Name, registries.EventConfigurationInvalid, "spec.repositoryDigestMirrors[0].source")
	t.Logf("refused: %s", note)
	other, err := mirror.ManifestDigest(ctx, "mirrored/other", "1")
	if err != nil {
		t.Fatal(err)
	}
	h.create(makePod(h.ns, "still-mirrored").image(source + "/icsp/other@" + other).obj())
	expectPlaced(h, "still-mirrored", "arm64", "ppc64le")
}

// TestImageConfigRegistrySources: the image config's insecureRegistries
// reach a plain-HTTP registry; its blockedRegistries release a pod at
// once without a required term; its allowedRegistries block every other
// registry, mirrors or not; both lists at once are refused by the
// apiserver (OpenShift's CRD), and the configuration stays.
func TestImageConfigRegistrySources(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	ctx := context.Background()
	oc := openShiftClient(t)
	plain, err := testBed.StartRegistry(ctx, "image-config-registry", bed.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Stop)
	pusher := newPusher(plain)
	images := map[string]string{}
	for _, repo := range []string{"team/insecure", "team/blocked", "team/unblocked", "allowed/app", "other/app"} {
		if images[repo], err = pusher.pushSingle(ctx, repo, "1", platform{"linux", "s390x"}); err != nil {
			t.Fatal(err)
		}
	}
	rc := newRegistryConfig(t)
	h := newHarness(t, "image-config", nil)
	h.create(makePod(h.ns, "before").image(images["team/insecure"]).obj())
	expectInspectionError(h, "before", "HTTP response to HTTPS client")

	rc.imageConfig(oc, configv1.ImageSpec{RegistrySources: configv1.RegistrySources{InsecureRegistries: []string{plain.Host}}}, "")
	h.create(makePod(h.ns, "insecure").image(images["team/insecure"]).obj())
	expectPlaced(h, "insecure", "s390x")

	rc.imageConfig(oc, configv1.ImageSpec{RegistrySources: configv1.RegistrySources{
		InsecureRegistries: []string{plain.Host}, BlockedRegistries: []string{plain.Host + "/team/blocked"},
	}}, "")
	h.create(makePod(h.ns, "blocked").image(images["team/blocked"]).obj())
	h.create(makePod(h.ns, "not-blocked").image(images["team/unblocked"]).obj())
	expectInspectionError(h, "blocked", "is blocked")
	expectPlaced(h, "not-blocked", "s390x")

	// Both lists: OpenShift's CRD refuses the update, nothing changes.
	img := &configv1.Image{}
	if err := oc.Get(ctx, types.NamespacedName{Name: registries.ImageConfigName}, img); err != nil {
		t.Fatal(err)
	}
	img.Spec.RegistrySources.AllowedRegistries = []string{plain.Host}
	err = oc.Update(ctx, img)
	if err == nil || !strings.Contains(err.Error(), "Only one of blockedRegistries or allowedRegistries may be set") {
		t.Errorf("an image config with allowed and blocked registries: %v, want the apiserver to refuse it", err)
	}

	rc.imageConfig(oc, configv1.ImageSpec{RegistrySources: configv1.RegistrySources{
		InsecureRegistries: []string{plain.Host}, AllowedRegistries: []string{plain.Host + "/allowed", testBed.Registry.Host},
	}}, "")
	h.create(makePod(h.ns, "allowed").image(images["allowed/app"]).obj())
	h.create(makePod(h.ns, "not-allowed").image(images["other/app"]).obj())
	expectPlaced(h, "allowed", "s390x")
	expectInspectionError(h, "not-allowed", "is blocked")
}

// TestAdditionalTrustedCA: a registry whose certificate a private CA
// signed is reached once the image config's additionalTrustedCA names a
// ConfigMap of openshift-config holding that CA under the registry's
// host..port. A ConfigMap without a certificate is refused with an event
// on it, and the CA trusted before stays.
func TestAdditionalTrustedCA(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	ctx := context.Background()
	oc := openShiftClient(t)
	caPEM, certPEM, keyPEM := testTLS(t)
	reg, err := testBed.StartRegistry(ctx, "additional-ca-registry", bed.RegistryOptions{TLSCert: certPEM, TLSKey: keyPEM, TLSCA: caPEM})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	img, err := newPusher(reg).pushSingle(ctx, "additional-ca/app", "1", platform{"linux", "ppc64le"})
	if err != nil {
		t.Fatal(err)
	}
	later, err := newPusher(reg).pushSingle(ctx, "additional-ca/later", "1", platform{"linux", "arm64"})
	if err != nil {
		t.Fatal(err)
	}
	rc := newRegistryConfig(t)
	h := newHarness(t, "additional-ca", nil)
	h.create(makePod(h.ns, "untrusted").image(img).obj())
	expectInspectionError(h, "untrusted", "certificate signed by unknown authority")

	const name = "registry-cas"
	key := strings.Replace(reg.Host, ":", "..", 1)
	rc.configMapIn(registries.OpenShiftConfigNamespace, name, map[string]string{key: string(caPEM)})
	rc.imageConfig(oc, configv1.ImageSpec{AdditionalTrustedCA: configv1.ConfigMapNameReference{Name: name}}, "")
	h.create(makePod(h.ns, "trusted").image(img).obj())
	expectPlaced(h, "trusted", "ppc64le")

	rc.configMapIn(registries.OpenShiftConfigNamespace, name, map[string]string{key: "not a certificate"})
	note := rc.waitEvent(registries.OpenShiftConfigNamespace, "ConfigMap", name, registries.EventConfigurationInvalid, "additionalTrustedCA")
	t.Logf("refused: %s", note)
	h.create(makePod(h.ns, "still-trusted").image(later).obj())
	expectPlaced(h, "still-trusted", "arm64")
}

// TestInternalRegistryServiceCA: the internal registry, whose certificate
// OpenShift's service CA signs, is reached with the service CA the
// operator injects into archway-service-ca (service-ca.crt), for the host
// the image config's status.internalRegistryHostname names. A hostname
// that is not a registry host is refused with an event on the image
// config.
func TestInternalRegistryServiceCA(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	ctx := context.Background()
	oc := openShiftClient(t)
	caPEM, certPEM, keyPEM := testTLS(t)
	reg, err := testBed.StartRegistry(ctx, "internal-registry", bed.RegistryOptions{TLSCert: certPEM, TLSKey: keyPEM, TLSCA: caPEM})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	img, err := newPusher(reg).pushSingle(ctx, "internal/app", "1", platform{"linux", "s390x"})
	if err != nil {
		t.Fatal(err)
	}
	rc := newRegistryConfig(t)
	rc.set(placement.DefaultServiceCAConfigMap, map[string]string{registries.ServiceCAKey: string(caPEM)})
	h := newHarness(t, "internal-registry", nil)
	// The service CA alone trusts no registry.
	h.create(makePod(h.ns, "no-internal-registry").image(img).obj())
	expectInspectionError(h, "no-internal-registry", "certificate signed by unknown authority")

	rc.imageConfig(oc, configv1.ImageSpec{}, reg.Host)
	h.create(makePod(h.ns, "internal").image(img).obj())
	expectPlaced(h, "internal", "s390x")

	// The status holds what the image registry operator writes; a path is
	// no host.
	current := &configv1.Image{}
	if err := oc.Get(ctx, types.NamespacedName{Name: registries.ImageConfigName}, current); err != nil {
		t.Fatal(err)
	}
	current.Status.InternalRegistryHostname = reg.Host + "/path"
	if err := oc.Status().Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	note := rc.waitEvent(metav1.NamespaceDefault, "Image", registries.ImageConfigName, registries.EventConfigurationInvalid, "status.internalRegistryHostname")
	t.Logf("refused: %s", note)
}

// TestOpenShiftGlobalPullSecret: on OpenShift (the bed serves the image
// config), a controller given no global pull secret inspects with
// openshift-config/pull-secret, as every node pulls with it.
func TestOpenShiftGlobalPullSecret(t *testing.T) {
	opts := suiteOptions()
	opts.GlobalPullSecret = types.NamespacedName{}
	// Not openshift-*: placement leaves those namespaces alone.
	h := newHarness(t, "ocp-pull-secret", nil)
	suiteController.stop()
	var err error
	if suiteController, err = startController(opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deletePods(context.Background(), h.ns)
		suiteController.stop()
		var err error
		if suiteController, err = startController(suiteOptions()); err != nil {
			t.Errorf("restarting the suite controller: %v", err)
			return
		}
		// The next case expects the webhook to gate again.
		if err := wait.PollUntilContextTimeout(context.Background(), bed.Interval, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
			p := makePod(h.ns, "probe").image(imgAMD64Only).obj()
			return k8s.Create(ctx, p, dryRunAll{}) == nil && gated(p), nil
		}); err != nil {
			t.Errorf("the webhook never gated after the suite controller restarted: %v", err)
		}
	})
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	err = wait.PollUntilContextTimeout(h.ctx, bed.Interval, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
		p := makePod(h.ns, "probe").image(imgAMD64Only).obj()
		return k8s.Create(ctx, p, dryRunAll{}) == nil && gated(p), nil
	})
	if err != nil {
		t.Fatalf("the webhook never gated after the controller restarted: %v", err)
	}
	h.create(makePod(h.ns, "anonymous").image(imgPrivate).obj())
	expectInspectionError(h, "anonymous", "")

	if err := ensureNamespace(h.ctx, registries.OpenShiftPullSecret.Namespace); err != nil {
		t.Fatal(err)
	}
	reg := testBed.AuthRegistry
	secret := dockerConfigSecret(registries.OpenShiftPullSecret.Namespace, registries.OpenShiftPullSecret.Name, reg.Host, reg.Username, reg.Password)
	if err := k8s.Create(h.ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), secret) })
	h.create(makePod(h.ns, "with-pull-secret").image(imgPrivate).obj())
	expectPlaced(h, "with-pull-secret", "arm64")
}
