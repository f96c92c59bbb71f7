package source

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// The directories OpenShift mounts a build's spec.source.secrets and
// spec.source.configMaps in, one subdirectory per Secret or ConfigMap name.
const (
	DefaultBuildSecretsDir    = "/var/run/secrets/openshift.io/build" //nolint:gosec // a mount path, not a credential
	DefaultBuildConfigMapsDir = "/var/run/configs/openshift.io/build"
)

// input is one Secret or ConfigMap to copy into the build context.
type input struct {
	kind, name, destination string
}

// inputs lists the Build's Secrets and ConfigMaps.
func inputs(src buildv1.BuildSource) []input {
	var out []input
	for _, s := range src.Secrets {
		out = append(out, input{kind: "secret", name: s.Secret.Name, destination: s.DestinationDir})
	}
	for _, c := range src.ConfigMaps {
		out = append(out, input{kind: "configMap", name: c.ConfigMap.Name, destination: c.DestinationDir})
	}
	return out
}

// copyInputs copies each mounted Secret and ConfigMap of the Build into
// the context directory at its destinationDir, as OpenShift's builder
// does for Docker builds. Mounted keys are symbolic links into a ..data
// directory: the copies are plain files. A Secret or ConfigMap that is not
// mounted fails with FetchSourceFailed.
func copyInputs(ctxDir string, src buildv1.BuildSource, secretsDir, configMapsDir string) error {
	root, err := os.OpenRoot(ctxDir)
	if err != nil {
		return fetchFailed("opening the context directory: %w", err)
	}
	defer func() { _ = root.Close() }()
	for _, in := range inputs(src) {
		from := filepath.Join(secretsDir, in.name)
		if in.kind == "configMap" {
			from = filepath.Join(configMapsDir, in.name)
		}
		dest := filepath.Clean(strings.TrimPrefix(in.destination, "/"))
		if !filepath.IsLocal(dest) && dest != "." {
			return fetchFailed("%s %s: destinationDir %q must be inside the context directory", in.kind, in.name, in.destination)
		}
		entries, err := os.ReadDir(from)
		if err != nil {
			return fetchFailed("%s %s is not mounted at %s: %w", in.kind, in.name, from, err)
		}
		if err := root.MkdirAll(dest, 0o755); err != nil {
			return fetchFailed("%s %s: %w", in.kind, in.name, err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "..") {
				continue // the kubelet's ..data and timestamped directories
			}
			info, err := os.Stat(filepath.Join(from, e.Name()))
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			if err := copyFile(root, filepath.Join(from, e.Name()), filepath.Join(dest, e.Name()), info.Mode().Perm()); err != nil {
				return fetchFailed("copying %s %s into the context: %w", in.kind, in.name, err)
			}
		}
	}
	return nil
}

func copyFile(root *os.Root, from, to string, mode fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	_ = root.Remove(to)
	out, err := root.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode|0o400)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", to, err)
	}
	return nil
}
