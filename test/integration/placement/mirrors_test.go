package placement

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
	"github.com/archway-build/archway/pkg/placement"
	"github.com/archway-build/archway/pkg/placement/registries"
	"github.com/archway-build/archway/test/bed"
)

// registryConfig writes the suite's registry ConfigMaps and waits until
// the controller says it applied them.
type registryConfig struct {
	t   *testing.T
	ctx context.Context
	ns  string
}

func newRegistryConfig(t *testing.T) *registryConfig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	t.Cleanup(cancel)
	rc := &registryConfig{t: t, ctx: ctx, ns: suiteOptions().Namespace}
	t.Cleanup(func() {
		// Back to no configuration: empty first (a change the controller
		// reports), then gone.
		for _, name := range []string{placement.DefaultRegistriesConfigMap, placement.DefaultRegistryCAConfigMap, placement.DefaultTrustedCAConfigMap, placement.DefaultServiceCAConfigMap} {
			cm := &corev1.ConfigMap{}
			if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: rc.ns, Name: name}, cm); err != nil {
				continue
			}
			rc.set(name, nil)
			_ = k8s.Delete(context.Background(), cm)
		}
	})
	return rc
}

// set creates or replaces a ConfigMap's data and waits for the
// controller's RegistryConfigurationApplied event for that version.
func (rc *registryConfig) set(name string, data map[string]string) {
	rc.t.Helper()
	rv := rc.write(name, data)
	rc.waitEvent(rc.ns, "ConfigMap", name, registries.EventConfigurationApplied, "resourceVersion "+rv+")")
}

func (rc *registryConfig) write(name string, data map[string]string) string {
	rc.t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rc.ns, Name: name}}
	err := k8s.Get(rc.ctx, client.ObjectKeyFromObject(cm), cm)
	switch {
	case apierrors.IsNotFound(err):
		cm.Data = data
		err = k8s.Create(rc.ctx, cm)
	case err == nil:
		cm.Data = data
		err = k8s.Update(rc.ctx, cm)
	}
	if err != nil {
		rc.t.Fatalf("writing ConfigMap %s: %v", name, err)
	}
	return cm.ResourceVersion
}

// waitEvent waits for an event about an object with reason and a note
// containing want, and returns the note.
func (rc *registryConfig) waitEvent(ns, kind, name, reason, want string) string {
	rc.t.Helper()
	var note string
	err := wait.PollUntilContextTimeout(rc.ctx, 50*time.Millisecond, bed.LongTimeout, true, func(ctx context.Context) (bool, error) {
		list := &eventsv1.EventList{}
		if err := k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Name == name && e.Reason == reason && strings.Contains(e.Note, want) {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		rc.t.Fatalf("no %s event for %s %s with %q: %v", reason, kind, name, want, err)
	}
	return note
}

// startMirror starts a registry (stopped at cleanup) holding the same
// index of arches as mirrored/app:1 and mirrored/other:1 (the tag of one,
// the digest of the other, so that no pod is answered from what another
// one cached), and returns it with the index's digest.
func startMirror(ctx context.Context, t *testing.T, name string, arches ...string) (*bed.Registry, string) {
	t.Helper()
	mirror, err := testBed.StartRegistry(ctx, name, bed.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mirror.Stop)
	for _, repo := range []string{"mirrored/app", "mirrored/other"} {
		if _, err := newPusher(mirror).pushIndex(ctx, repo, "1", linux(arches...)...); err != nil {
			t.Fatal(err)
		}
	}
	dgst, err := mirror.ManifestDigest(ctx, "mirrored/app", "1")
	if err != nil {
		t.Fatal(err)
	}
	return mirror, dgst
}

// registriesConf is a registries.conf from TOML lines.
func registriesConf(lines ...string) map[string]string {
	return map[string]string{registries.RegistriesConfKey: strings.Join(lines, "\n") + "\n"}
}

// expectPlaced checks that a released pod got the required term for
// exactly archs.
func expectPlaced(h *harness, name string, archs ...string) {
	h.t.Helper()
	pod := h.waitReleased(name)
	if pod.Labels[placement.ImageInspectionErrorLabel] == "" && pod.Labels[placement.NodeAffinityLabel] == placement.LabelValueSet {
		got := sets.List(requiredArchs(pod))
		if strings.Join(got, ",") == strings.Join(archs, ",") {
			return
		}
		h.t.Errorf("pod %s: required architectures %v, want %v", name, got, archs)
		return
	}
	h.t.Errorf("pod %s: not placed (labels %v, annotation %q)", name, pod.Labels, pod.Annotations[placement.ImageInspectionErrorAnnotation])
}

// expectInspectionError checks that a pod was released after its images
// could not be inspected, without a required term.
func expectInspectionError(h *harness, name, why string) {
	h.t.Helper()
	pod := h.waitReleased(name)
	h.expectLabels(pod, map[string]string{placement.ImageInspectionErrorLabel: "", placement.NodeAffinityLabel: placement.LabelValueNotSet})
	if note := h.waitEvent(name, placement.EventInspectionError); !strings.Contains(note, why) {
		h.t.Errorf("pod %s: inspection error %q does not say %q", name, note, why)
	}
}

// TestInsecureRegistryFromConfigMap: a plain-HTTP registry the options do
// not list is reached only once the registries ConfigMap marks it
// insecure; the ConfigMap is changed while the controller runs, and the
// next pod uses it.
func TestInsecureRegistryFromConfigMap(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	ctx := context.Background()
	plain, err := testBed.StartRegistry(ctx, "insecure-registry", bed.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Stop)
	img, err := newPusher(plain).pushSingle(ctx, "insecure/app", "1", platform{"linux", "arm64"})
	if err != nil {
		t.Fatal(err)
	}
	rc := newRegistryConfig(t)
	h := newHarness(t, "insecure", nil)
	h.create(makePod(h.ns, "before").image(img).obj())
	expectInspectionError(h, "before", "HTTP response to HTTPS client")

	rc.set(placement.DefaultRegistriesConfigMap, registriesConf(`[[registry]]`, fmt.Sprintf("location = %q", plain.Host), `insecure = true`))
	h.create(makePod(h.ns, "after").image(img).obj())
	expectPlaced(h, "after", "arm64")
}

// TestMirrorsFromConfigMap: images reachable only through a mirror (the
// source is a closed port). A digest-only mirror serves digest references
// and not tags; a tag-only mirror serves tags and not digests, as a node
// pulls them.
func TestMirrorsFromConfigMap(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	ctx := context.Background()
	mirror, dgst := startMirror(ctx, t, "mirror-registry", "arm64", "s390x")
	source := closedPortRegistry(t)
	rc := newRegistryConfig(t)
	h := newHarness(t, "mirrors", nil)
	// Without the configuration, the source alone is asked.
	h.create(makePod(h.ns, "unconfigured").image(source + "/digest/app@" + dgst).obj())
	expectInspectionError(h, "unconfigured", "connection refused")

	rc.set(placement.DefaultRegistriesConfigMap, registriesConf(
		`[[registry]]`, fmt.Sprintf("location = %q", source+"/digest"),
		`[[registry.mirror]]`, fmt.Sprintf("location = %q", mirror.Host+"/mirrored"), `insecure = true`, `pull-from-mirror = "digest-only"`,
		`[[registry]]`, fmt.Sprintf("location = %q", source+"/tag"),
		`[[registry.mirror]]`, fmt.Sprintf("location = %q", mirror.Host+"/mirrored"), `insecure = true`, `pull-from-mirror = "tag-only"`,
	))
	h.create(makePod(h.ns, "by-digest").image(source + "/digest/app@" + dgst).obj())
	h.create(makePod(h.ns, "tag-not-digest-mirrored").image(source + "/digest/app:1").obj())
	h.create(makePod(h.ns, "by-tag").image(source + "/tag/app:1").obj())
	h.create(makePod(h.ns, "digest-not-tag-mirrored").image(source + "/tag/other@" + dgst).obj())
	expectPlaced(h, "by-digest", "arm64", "s390x")
	expectPlaced(h, "by-tag", "arm64", "s390x")
	expectInspectionError(h, "tag-not-digest-mirrored", "connection refused")
	expectInspectionError(h, "digest-not-tag-mirrored", "connection refused")
}

// TestMirrorSets: OpenShift's ImageDigestMirrorSet and ImageTagMirrorSet,
// served by the bed as on OpenShift, mirror as the ConfigMap does; the
// mirror registry is marked insecure in the ConfigMap (a mirror set cannot
// say it).
func TestMirrorSets(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	ctx := context.Background()
	s := runtime.NewScheme()
	if err := configv1.Install(s); err != nil {
		t.Fatal(err)
	}
	oc, err := client.New(testBed.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	mirror, err := testBed.StartRegistry(ctx, "mirror-set-registry", bed.RegistryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mirror.Stop)
	if _, err := newPusher(mirror).pushIndex(ctx, "mirrored/app", "1", linux("amd64", "ppc64le")...); err != nil {
		t.Fatal(err)
	}
	dgst, err := mirror.ManifestDigest(ctx, "mirrored/app", "1")
	if err != nil {
		t.Fatal(err)
	}
	source := closedPortRegistry(t)
	rc := newRegistryConfig(t)
	rc.set(placement.DefaultRegistriesConfigMap, registriesConf(`[[registry]]`, fmt.Sprintf("location = %q", mirror.Host), `insecure = true`))
	idms := &configv1.ImageDigestMirrorSet{ObjectMeta: metav1.ObjectMeta{Name: "test-digest-mirrors"}, Spec: configv1.ImageDigestMirrorSetSpec{
		ImageDigestMirrors: []configv1.ImageDigestMirrors{{Source: source + "/idms", Mirrors: []configv1.ImageMirror{configv1.ImageMirror(mirror.Host + "/mirrored")}}},
	}}
	itms := &configv1.ImageTagMirrorSet{ObjectMeta: metav1.ObjectMeta{Name: "test-tag-mirrors"}, Spec: configv1.ImageTagMirrorSetSpec{
		ImageTagMirrors: []configv1.ImageTagMirrors{{Source: source + "/itms", Mirrors: []configv1.ImageMirror{configv1.ImageMirror(mirror.Host + "/mirrored")}}},
	}}
	for _, o := range []client.Object{idms, itms} {
		if err := oc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = oc.Delete(context.Background(), o) })
	}
	// Events about cluster-scoped objects go to the default namespace.
	rc.waitEvent(metav1.NamespaceDefault, "ImageDigestMirrorSet", idms.Name, registries.EventConfigurationApplied, "resourceVersion "+idms.ResourceVersion+")")
	rc.waitEvent(metav1.NamespaceDefault, "ImageTagMirrorSet", itms.Name, registries.EventConfigurationApplied, "resourceVersion "+itms.ResourceVersion+")")

	h := newHarness(t, "mirror-sets", nil)
	h.create(makePod(h.ns, "idms-digest").image(source + "/idms/app@" + dgst).obj())
	h.create(makePod(h.ns, "idms-tag").image(source + "/idms/app:1").obj())
	h.create(makePod(h.ns, "itms-tag").image(source + "/itms/app:1").obj())
	expectPlaced(h, "idms-digest", "amd64", "ppc64le")
	expectPlaced(h, "itms-tag", "amd64", "ppc64le")
	expectInspectionError(h, "idms-tag", "connection refused")
}

// testTLS makes a CA and a server certificate it signs for 127.0.0.1.
func testTLS(t *testing.T) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "placement test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// TestPrivateCA: a registry serving TLS with a certificate of a CA the
// test makes is reached once that CA is trusted, for that registry
// (registry CA ConfigMap, key host..port) or for all (trusted CA
// ConfigMap); taking the CA away again drops what was cached with it.
func TestPrivateCA(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{})
	ctx := context.Background()
	caPEM, certPEM, keyPEM := testTLS(t)
	reg, err := testBed.StartRegistry(ctx, "tls-registry", bed.RegistryOptions{TLSCert: certPEM, TLSKey: keyPEM, TLSCA: caPEM})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	img, err := newPusher(reg).pushSingle(ctx, "private-ca/app", "1", platform{"linux", "ppc64le"})
	if err != nil {
		t.Fatal(err)
	}
	rc := newRegistryConfig(t)
	h := newHarness(t, "private-ca", nil)
	h.create(makePod(h.ns, "untrusted").image(img).obj())
	expectInspectionError(h, "untrusted", "certificate signed by unknown authority")

	key := strings.Replace(reg.Host, ":", "..", 1)
	rc.set(placement.DefaultRegistryCAConfigMap, map[string]string{key: string(caPEM)})
	h.create(makePod(h.ns, "registry-ca").image(img).obj())
	expectPlaced(h, "registry-ca", "ppc64le")

	rc.set(placement.DefaultRegistryCAConfigMap, nil)
	rc.set(placement.DefaultTrustedCAConfigMap, map[string]string{registries.TrustedCAKey: string(caPEM)})
	h.create(makePod(h.ns, "trusted-ca").image(img).obj())
	expectPlaced(h, "trusted-ca", "ppc64le")

	// The image's answer was cached for a minute; a configuration without
	// the CA drops it, and the registry is asked again, and refused.
	rc.set(placement.DefaultTrustedCAConfigMap, nil)
	h.create(makePod(h.ns, "untrusted-again").image(img).obj())
	expectInspectionError(h, "untrusted-again", "certificate signed by unknown authority")
}

// TestBlockedRegistry: a pod whose image is on a registry the ConfigMap
// blocks is released at once (one inspection), with the inspection error
// event and labels and without a required term, even with a fallback
// architecture configured; unblocked, the next pod is placed. A
// ConfigMap that does not parse is refused with an event, and the
// previous configuration (blocked) stays.
func TestBlockedRegistry(t *testing.T) {
	ensureConfig(t, multiarchv1beta1.ClusterPodPlacementConfigSpec{FallbackArchitecture: "arm64"})
	ctx := context.Background()
	img, err := newPusher(testBed.Registry).pushSingle(ctx, "blocked-team/app", "1", platform{"linux", "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	rc := newRegistryConfig(t)
	h := newHarness(t, "blocked", nil)
	blocked := registriesConf(`[[registry]]`, fmt.Sprintf("location = %q", testBed.Registry.Host+"/blocked-team"), `blocked = true`)
	rc.set(placement.DefaultRegistriesConfigMap, blocked)
	h.create(makePod(h.ns, "blocked").image(img).obj())
	pod := h.waitReleased("blocked")
	h.expectLabels(pod, map[string]string{
		placement.ImageInspectionErrorLabel: "", placement.ImageInspectionErrorCountLabel: "1", placement.NodeAffinityLabel: placement.LabelValueNotSet,
	})
	h.expectNoLabels(pod, placement.FallbackArchLabel)
	if archs := requiredArchs(pod); archs.Len() > 0 {
		t.Errorf("blocked: required architectures %v, want none", archs)
	}
	if note := h.waitEvent("blocked", placement.EventInspectionError); !strings.Contains(note, "is blocked") {
		t.Errorf("blocked: event note %q does not say the registry is blocked", note)
	}

	// Not TOML: refused, and the blocked registry stays blocked.
	rv := rc.write(placement.DefaultRegistriesConfigMap, map[string]string{registries.RegistriesConfKey: "[[registry"})
	note := rc.waitEvent(rc.ns, "ConfigMap", placement.DefaultRegistriesConfigMap, registries.EventConfigurationInvalid, "not a registries.conf")
	t.Logf("refused resourceVersion %s: %s", rv, note)
	h.create(makePod(h.ns, "still-blocked").image(img).obj())
	h.expectLabels(h.waitReleased("still-blocked"), map[string]string{placement.ImageInspectionErrorCountLabel: "1", placement.NodeAffinityLabel: placement.LabelValueNotSet})

	rc.set(placement.DefaultRegistriesConfigMap, nil)
	h.create(makePod(h.ns, "unblocked").image(img).obj())
	expectPlaced(h, "unblocked", "amd64")
}
