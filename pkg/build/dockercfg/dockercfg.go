// Package dockercfg finds the registry credentials a build pod is given: the
// docker config files OpenShift mounts from a push or pull secret and names
// with PUSH_DOCKERCFG_PATH and PULL_DOCKERCFG_PATH.
//
// Such a variable names either a file or the directory a Secret is mounted
// in. A Secret of type kubernetes.io/dockerconfigjson holds the key
// .dockerconfigjson (the config.json format, {"auths": {...}}); one of type
// kubernetes.io/dockercfg holds .dockercfg (the legacy format, a map of
// registries without "auths"). containers/image reads both, but must be told
// which format a file has.
package dockercfg

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.podman.io/image/v5/types"
)

// fileNames are the names a docker config file can have in a mounted
// Secret or a docker configuration directory, most specific first.
var fileNames = []string{".dockerconfigjson", "config.json", ".dockercfg"}

// File is a docker config file and its format.
type File struct {
	// Path is the file's path.
	Path string
	// Legacy is true for the .dockercfg format (no "auths" key).
	Legacy bool
}

// Find returns the docker config file that path names: path itself when it
// is a file, else the first of .dockerconfigjson, config.json and .dockercfg
// in the directory path. An empty path means no credentials: the zero File
// and no error. A path that does not exist or holds no config file is an
// error, so that a mistyped secret mount is not mistaken for "no
// credentials".
func Find(path string) (File, error) {
	if path == "" {
		return File{}, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return File{}, fmt.Errorf("docker config %s: %w", path, err)
	}
	if info.IsDir() {
		for _, name := range fileNames {
			candidate := filepath.Join(path, name)
			if _, err := os.Stat(candidate); err == nil {
				return classify(candidate)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return File{}, fmt.Errorf("docker config %s: %w", candidate, err)
			}
		}
		return File{}, fmt.Errorf("docker config directory %s holds none of %v", path, fileNames)
	}
	return classify(path)
}

// classify reads path to tell the config.json format from the legacy one.
func classify(path string) (File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("docker config %s: %w", path, err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return File{}, fmt.Errorf("docker config %s is not JSON: %w", path, err)
	}
	_, hasAuths := top["auths"]
	_, hasHelpers := top["credHelpers"]
	legacy := !hasAuths && !hasHelpers && len(top) > 0
	return File{Path: path, Legacy: legacy}, nil
}

// Apply makes sys use f for credentials, and only f. The zero File leaves
// sys unchanged (containers/image then looks in its default places).
func (f File) Apply(sys *types.SystemContext) {
	switch {
	case f.Path == "":
	case f.Legacy:
		sys.LegacyFormatAuthFilePath = f.Path
		sys.AuthFilePath = ""
	default:
		sys.AuthFilePath = f.Path
		sys.LegacyFormatAuthFilePath = ""
	}
}
