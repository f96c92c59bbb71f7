package openshift_test

import (
	"context"
	"strings"
	"testing"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/test/bed"
)

// TestCustomBuildsTrustTheClusterRegistryCAs: a registry serves TLS with a
// certificate of a CA that only the cluster's additional trusted CAs hold
// (OpenShift mounts them into the custom pod as the Build's <build>-ca
// ConfigMap); the custom builder mounts that ConfigMap into every
// platform's pod and the manifest-list pod, so a Build whose base and
// output are on that registry completes for every platform. A Build of a
// namespace whose cluster holds no such CA fails at the pull of its base,
// naming the certificate.
func TestCustomBuildsTrustTheClusterRegistryCAs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), bed.BuildTimeout)
	defer cancel()
	// Not a loopback address: the builder reaches loopback registries
	// without TLS checks, as docker does.
	ip := bed.NonLoopbackIP()
	if ip == nil {
		t.Skip("the machine has no IPv4 address but loopback, where registries are reached without TLS checks")
	}
	caPEM, certPEM, keyPEM, err := bed.ServingCert(ip)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := theBed.StartRegistry(ctx, "private-ca-registry", bed.RegistryOptions{
		TLSCert: certPEM, TLSKey: keyPEM, TLSCA: caPEM, Address: ip.String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	ns, err := theBed.CreateNamespace(ctx, "ocp-cas")
	if err != nil {
		t.Fatal(err)
	}
	base := reg.Host + "/" + ns + "/base:1"
	if err := reg.CopyIndex(ctx, theBed.BaseImage, base, nil); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(reg.Host, ":")
	theStandIn.setClusterCAs(ns, map[string]string{host + ".." + port: string(caPEM)})
	two := []string{"linux/amd64", "linux/arm64"}
	dockerfile := "FROM " + base + "\nENV TRUSTED=yes\n"
	b := customBuildFor(t, ctx, ns, "private-ca-1", dockerfile, reg.Host+"/"+ns+"/app:v1", two)
	if phase := waitEnd(t, ctx, ns, b.GetName()); phase != "Complete" {
		log, _ := podLog(ctx, ns, b.GetName()+"-build")
		t.Fatalf("Build phase = %s, want Complete (its registry's CA is the cluster's); the custom pod's log:\n%s", phase, log)
	}
	mab, err := multiArchBuild(ctx, ns, b.GetName())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range mab.Status.Platforms {
		if e.Phase != buildv1.BuildPhaseComplete {
			t.Errorf("platform %s: %s (%s) %s, want Complete", e.Platform, e.Phase, e.Reason, e.Message)
		}
	}
	if len(mab.Status.Platforms) != len(two) {
		t.Errorf("platforms = %+v, want %v", mab.Status.Platforms, two)
	}
	if _, err := reg.ManifestDigest(ctx, ns+"/app", "v1"); err != nil {
		t.Errorf("the index was not pushed to the registry of the private CA: %v", err)
	}

	others, err := theBed.CreateNamespace(ctx, "ocp-no-cas")
	if err != nil {
		t.Fatal(err)
	}
	b = customBuildFor(t, ctx, others, "private-ca-2", dockerfile, reg.Host+"/"+others+"/app:v1", two)
	if phase := waitEnd(t, ctx, others, b.GetName()); phase != "Failed" {
		t.Fatalf("Build phase = %s, want Failed (no CA of its registry is trusted)", phase)
	}
	if mab, err = multiArchBuild(ctx, others, b.GetName()); err != nil {
		t.Fatal(err)
	}
	untrusted := 0
	for _, e := range mab.Status.Platforms {
		if strings.Contains(e.Message, "certificate") {
			untrusted++
		}
	}
	if untrusted == 0 {
		t.Errorf("no platform failed naming the registry's certificate: %+v", mab.Status.Platforms)
	}
}
