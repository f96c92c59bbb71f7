package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// fileNames are the names a docker config file can have in a mounted
// Secret or a docker configuration directory, most specific first.
var fileNames = []string{".dockerconfigjson", "config.json", ".dockercfg"}

// AuthFile is a docker config file and its format. Build pods are given
// one in the directories OpenShift mounts a push or pull Secret in and names
// with PUSH_DOCKERCFG_PATH and PULL_DOCKERCFG_PATH: a Secret of type
// kubernetes.io/dockerconfigjson holds the key .dockerconfigjson (the
// config.json format, {"auths": {...}}); one of type kubernetes.io/dockercfg
// holds .dockercfg (the legacy format, a map of registries without
// "auths"). containers/image reads both, but must be told which format a
// file has, and the format is decided by the content, never the file name.
type AuthFile struct {
	// Path is the file's path.
	Path string
	// Legacy is true for the .dockercfg format (no "auths" key).
	Legacy bool
}

// FindAuthFile returns the docker config file that path names: path itself when it
// is a file, else the first of .dockerconfigjson, config.json and .dockercfg
// in the directory path. An empty path means no credentials: the zero File
// and no error. A path that does not exist or holds no config file is an
// error, so that a mistyped secret mount is not mistaken for "no
// credentials".
func FindAuthFile(path string) (AuthFile, error) {
	if path == "" {
		return AuthFile{}, nil
	}
	info, err := os.Stat(path) //nolint:gosec // G703: the file the user or the pod spec names, read as podman reads it
	if err != nil {
		return AuthFile{}, fmt.Errorf("docker config %s: %w", path, err)
	}
	if info.IsDir() {
		for _, name := range fileNames {
			candidate := filepath.Join(path, name)
			if _, err := os.Stat(candidate); err == nil { //nolint:gosec // G703: as above
				return classify(candidate)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return AuthFile{}, fmt.Errorf("docker config %s: %w", candidate, err)
			}
		}
		return AuthFile{}, fmt.Errorf("docker config directory %s holds none of %v", path, fileNames)
	}
	return classify(path)
}

// classify reads path to tell the config.json format from the legacy one.
func classify(path string) (AuthFile, error) {
	data, err := os.ReadFile(path) //nolint:gosec // G703: as above
	if err != nil {
		return AuthFile{}, fmt.Errorf("docker config %s: %w", path, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return AuthFile{}, fmt.Errorf("docker config %s is not JSON: %w", path, err)
	}
	_, hasAuths := top["auths"]
	_, hasHelpers := top["credHelpers"]
	legacy := !hasAuths && !hasHelpers && len(top) > 0
	return AuthFile{Path: path, Legacy: legacy}, nil
}

// AuthFileEnv names the docker config file podman, skopeo and buildah read
// the user's credentials from instead of the default places.
const AuthFileEnv = "REGISTRY_AUTH_FILE"

// UserAuthFile returns the docker config file of a command run by a user:
// path when given (a flag), else $REGISTRY_AUTH_FILE as podman reads it,
// else the zero AuthFile (containers/image's default places).
func UserAuthFile(path string) (AuthFile, error) {
	if path != "" {
		return FindAuthFile(path)
	}
	if env := os.Getenv(AuthFileEnv); env != "" {
		f, err := FindAuthFile(env)
		if err != nil {
			return AuthFile{}, fmt.Errorf("$%s: %w", AuthFileEnv, err)
		}
		return f, nil
	}
	return AuthFile{}, nil
}
