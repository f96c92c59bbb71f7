package builder_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/builder/docker"
)

// TestDockerBuildMountTrustedCA builds a Build with mountTrustedCA through
// `builder docker-build`: its RUN step reads the trusted CA bundle at the
// Red Hat and the Debian trust paths, and no layer of the pushed image
// holds either path (the base image has neither, so buildah makes the
// mount points itself). Without mountTrustedCA the same step fails: the
// bundle is there only when asked for.
func TestDockerBuildMountTrustedCA(t *testing.T) {
	ctx := t.Context()
	g := NewWithT(t)
	const marker = "# archway trusted CA bundle marker"
	caDir := t.TempDir()
	// As a ConfigMap volume holds it: a symbolic link into the data.
	g.Expect(os.Mkdir(filepath.Join(caDir, "..data"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(caDir, "..data", docker.TrustedCABundleFile),
		[]byte(marker+"\n-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), 0o644)).To(Succeed())
	g.Expect(os.Symlink(filepath.Join("..data", docker.TrustedCABundleFile), filepath.Join(caDir, docker.TrustedCABundleFile))).To(Succeed())

	dockerfile := "FROM " + theBed.BaseImage + "\n" +
		"RUN head -n 1 /etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem > /seen-pki && head -n 1 /etc/ssl/certs/ca-certificates.crt > /seen-ssl\n"
	output := theBed.Registry.Host + "/it/trustedca:v1"
	b := newBuild("trustedca", "trustedca-1", dockerfile, output, nil, nil)
	b.Spec.MountTrustedCA = ptr.To(true)
	log, code := runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, b, "")}, "docker-build", "--no-report", "--trusted-ca-dir", caDir)
	g.Expect(code).To(Equal(0), log)

	d, err := theBed.Registry.ManifestDigest(ctx, "it/trustedca", "v1")
	g.Expect(err).NotTo(HaveOccurred())
	img, err := theBed.Registry.OpenImage(ctx, output)
	g.Expect(err).NotTo(HaveOccurred())
	defer img.Close()
	for _, f := range []string{"/seen-pki", "/seen-ssl"} {
		got, err := img.TopLayerFile(ctx, digestOf(d), f)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(marker+"\n"), "%s: what the RUN step read", f)
	}
	for _, f := range []string{"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/certs/ca-certificates.crt"} {
		_, err := img.TopLayerFile(ctx, digestOf(d), f)
		g.Expect(err).To(MatchError(ContainSubstring("no "+f+" in the layers")), "the image holds %s", f)
	}

	without := newBuild("trustedca", "trustedca-2", dockerfile, theBed.Registry.Host+"/it/trustedca:v2", nil, nil)
	log, code = runBuilder(t, []string{buildv1.BuildEnv + "=" + podBuildJSON(t, without, "")}, "docker-build", "--no-report", "--trusted-ca-dir", caDir)
	g.Expect(code).To(Equal(1), log)
	g.Expect(log).To(ContainSubstring("No such file or directory"))
}
