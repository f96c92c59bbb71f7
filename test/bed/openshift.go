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
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		return fmt.Errorf("finding github.com/openshift/api: %w", err)
	}
	api := strings.TrimSpace(string(out))
	config := filepath.Join(api, "config", "v1", "zz_generated.crd-manifests")
	_, err = envtest.InstallCRDs(b.Config, envtest.CRDInstallOptions{Paths: []string{
		filepath.Join(config, "0000_10_config-operator_01_imagedigestmirrorsets.crd.yaml"),
		filepath.Join(config, "0000_10_config-operator_01_imagetagmirrorsets.crd.yaml"),
		filepath.Join(config, "0000_10_config-operator_01_images.crd.yaml"),
		filepath.Join(api, "operator", "v1alpha1", "zz_generated.crd-manifests", "0000_10_config-operator_01_imagecontentsourcepolicies.crd.yaml"),
	}, ErrorIfPathMissing: true})
	if err != nil {
		return fmt.Errorf("installing OpenShift's registry CRDs: %w", err)
	}
	return nil
}
