package manifestlist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.podman.io/image/v5/types"
)

// userAgent is what archway's requests to registries say they are.
const userAgent = "archway-builder"

// Access says how to reach registries: whose credentials, and how strict to
// be about TLS.
type Access struct {
	// AuthFile is a docker config file with the registries' credentials
	// ({"auths": {"registry.example.com": {"auth": "..."}}}, credential
	// helpers included), or a legacy .dockercfg (recognized by that name).
	// Empty means where containers/image looks by default
	// ($REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json,
	// ~/.docker/config.json, ...).
	AuthFile string
	// Insecure allows registries that serve plain HTTP or a certificate that
	// does not verify. Registries marked insecure in registries.conf are
	// insecure regardless.
	Insecure bool
}

// SystemContext returns the containers/image settings for a.
func (a Access) SystemContext() *types.SystemContext {
	sys := &types.SystemContext{DockerRegistryUserAgent: userAgent}
	if a.AuthFile != "" {
		if filepath.Base(a.AuthFile) == legacyDockerCfg {
			sys.LegacyFormatAuthFilePath = a.AuthFile
		} else {
			sys.AuthFilePath = a.AuthFile
		}
	}
	if a.Insecure {
		sys.DockerInsecureSkipTLSVerify = types.OptionalBoolTrue
	}
	return sys
}

// The names of the files a Kubernetes image pull secret holds, in the order
// AuthFileFromDir prefers them.
const (
	dockerConfigJSON = ".dockerconfigjson" // kubernetes.io/dockerconfigjson
	dockerConfigFile = "config.json"       // a docker config directory
	legacyDockerCfg  = ".dockercfg"        // kubernetes.io/dockercfg
)

// AuthFileFromDir returns the docker config file in dir, a directory where a
// Secret is mounted (as $PUSH_DOCKERCFG_PATH and $PULL_DOCKERCFG_PATH are for
// build pods): .dockerconfigjson, else config.json, else the legacy
// .dockercfg, which Access.AuthFile also accepts. A dir that is a file is
// returned as it is. An empty dir, or one with none of these files, gives ""
// (no credentials) and no error.
func AuthFileFromDir(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	if info, err := os.Stat(dir); err == nil && !info.IsDir() {
		return dir, nil
	}
	for _, name := range []string{dockerConfigJSON, dockerConfigFile, legacyDockerCfg} {
		path := filepath.Join(dir, name)
		info, err := os.Stat(path)
		switch {
		case err == nil && !info.IsDir():
			return path, nil
		case err == nil, errors.Is(err, os.ErrNotExist):
		default:
			return "", fmt.Errorf("reading registry credentials in %s: %w", dir, err)
		}
	}
	return "", nil
}
