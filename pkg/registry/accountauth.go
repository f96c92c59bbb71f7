package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// AccountAuthFor returns the docker config of the first of a service
// account's image pull secrets, mounted one per directory under dir, that
// has credentials for host (a registry's host[:port]), as OpenShift picks
// the builder account's docker secret for a push: the zero AuthFile
// (anonymous) when none has.
func AccountAuthFor(dir, host string) (AuthFile, error) {
	files, err := accountFiles(dir)
	if err != nil {
		return AuthFile{}, err
	}
	for _, f := range files {
		auths, err := readAuths(f)
		if err != nil {
			return AuthFile{}, err
		}
		for key := range auths {
			if authHost(key) == host {
				return f, nil
			}
		}
	}
	return AuthFile{}, nil
}

// authHost is the registry host a docker config's key names: keys may be
// host[:port], a URL (https://host/v1/) or host/path.
func authHost(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	host, _, _ := strings.Cut(key, "/")
	if host == "index.docker.io" || host == "registry-1.docker.io" {
		return "docker.io"
	}
	return host
}

// accountFiles are the docker configs under dir, in the account's order; a
// directory holding none (a secret of another type) is skipped.
func accountFiles(dir string) ([]AuthFile, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the service account's pull secrets in %s: %w", dir, err)
	}
	// The directories are 0, 1, ...: the account's order.
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return numericOrder(a.Name(), b.Name()) })
	var files []AuthFile
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if f, err := FindAuthFile(filepath.Join(dir, e.Name())); err == nil {
			files = append(files, f)
		}
	}
	return files, nil
}

// readAuths reads a docker config's credentials by registry, in either
// format.
func readAuths(f AuthFile) (map[string]json.RawMessage, error) {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, err
	}
	var auths map[string]json.RawMessage
	if f.Legacy {
		err = json.Unmarshal(data, &auths)
	} else {
		var top struct {
			Auths map[string]json.RawMessage `json:"auths"`
		}
		err = json.Unmarshal(data, &top)
		auths = top.Auths
	}
	if err != nil {
		return nil, fmt.Errorf("docker config %s: %w", f.Path, err)
	}
	return auths, nil
}

// MergeAccountAuth gathers the credentials of a service account's image
// pull secrets, mounted one per directory under dir (as build-controller
// mounts them, in the order the account lists them), into one config.json
// file written in workDir, and returns it: for a registry named by several,
// the first secret's credentials win, as OpenShift picks the first of the
// builder account's docker secrets that matches. A directory holding no
// docker config (a secret of another type) is skipped. An empty dir, or
// no credentials at all, is the zero AuthFile: anonymous access.
func MergeAccountAuth(dir, workDir string) (AuthFile, error) {
	files, err := accountFiles(dir)
	if err != nil {
		return AuthFile{}, err
	}
	auths := map[string]json.RawMessage{}
	for _, f := range files {
		one, err := readAuths(f)
		if err != nil {
			return AuthFile{}, err
		}
		for registry, cred := range one {
			if _, ok := auths[registry]; !ok {
				auths[registry] = cred
			}
		}
	}
	if len(auths) == 0 {
		return AuthFile{}, nil
	}
	data, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		return AuthFile{}, err
	}
	path := filepath.Join(workDir, "account-auth.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return AuthFile{}, err
	}
	return AuthFile{Path: path}, nil
}

// numericOrder orders directory names that are numbers by their value,
// others after them by name.
func numericOrder(a, b string) int {
	var x, y int
	_, errA := fmt.Sscanf(a, "%d", &x)
	_, errB := fmt.Sscanf(b, "%d", &y)
	switch {
	case errA == nil && errB == nil:
		return x - y
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}
