package bed

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// InstallOpenShiftRegistryCRDs installs the CRDs of OpenShift's registry
// settings (ImageDigestMirrorSet, ImageTagMirrorSet, the image config,
// ImageContentSourcePolicy), as github.com/openshift/api (the version
// go.mod pins) ships them, so that the bed serves config.openshift.io/v1
// and operator.openshift.io/v1alpha1 as an OpenShift cluster does. A
// component discovers them when it starts: start it after this.
func (b *Bed) InstallOpenShiftRegistryCRDs() error {
	config := filepath.Join("config", "v1", "zz_generated.crd-manifests")
	if err := b.installOpenShiftCRDs(
		filepath.Join(config, "0000_10_config-operator_01_imagedigestmirrorsets.crd.yaml"),
		filepath.Join(config, "0000_10_config-operator_01_imagetagmirrorsets.crd.yaml"),
		filepath.Join(config, "0000_10_config-operator_01_images.crd.yaml"),
		filepath.Join("operator", "v1alpha1", "zz_generated.crd-manifests", "0000_10_config-operator_01_imagecontentsourcepolicies.crd.yaml"),
	); err != nil {
		return fmt.Errorf("installing OpenShift's registry CRDs: %w", err)
	}
	return nil
}

// installOpenShiftCRDs installs the CRDs at paths (globs) inside the
// github.com/openshift/api module go.mod pins.
func (b *Bed) installOpenShiftCRDs(paths ...string) error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		return fmt.Errorf("finding github.com/openshift/api: %w", err)
	}
	root := strings.TrimSpace(string(out))
	var files []string
	for _, p := range paths {
		matches, err := filepath.Glob(filepath.Join(root, p))
		if err != nil {
			return err
		}
		if len(matches) == 0 {
			return fmt.Errorf("github.com/openshift/api (%s) has no %s", root, p)
		}
		files = append(files, matches...)
	}
	_, err = envtest.InstallCRDs(b.Config, envtest.CRDInstallOptions{Paths: files, ErrorIfPathMissing: true})
	return err
}
