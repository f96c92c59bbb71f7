package image

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/distribution/reference"
)

// dockerHub is the registry host image references without one resolve to,
// and the host every legacy name of Docker Hub maps to.
const dockerHub = "docker.io"

// Keyring holds the credentials of several docker config files (pull
// secrets) and picks those that apply to an image the way a kubelet does:
// sources in the order they were added (the pod's secrets, then its service
// account's, then the global pull secret), and within one source the most
// specific matching key first. A kubelet tries every match in that order
// and falls back to anonymous access only when nothing matches.
type Keyring struct {
	sources [][]keyringEntry
}

type keyringEntry struct {
	host, path string // normalized key: host may hold globs and a port
	cred       Credential
}

// dockerConfigEntry is one value of a docker config's auths map.
type dockerConfigEntry struct {
	Auth          string `json:"auth,omitempty"`
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
}

// AddDockerConfigJSON adds the contents of a kubernetes.io/dockerconfigjson
// secret's .dockerconfigjson key ({"auths": {...}}) as one source.
func (k *Keyring) AddDockerConfigJSON(data []byte) error {
	var cfg struct {
		Auths map[string]dockerConfigEntry `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("reading a docker config: %w", err)
	}
	return k.add(cfg.Auths)
}

// AddDockercfg adds the contents of a legacy kubernetes.io/dockercfg
// secret's .dockercfg key (the auths map itself) as one source.
func (k *Keyring) AddDockercfg(data []byte) error {
	var auths map[string]dockerConfigEntry
	if err := json.Unmarshal(data, &auths); err != nil {
		return fmt.Errorf("reading a dockercfg: %w", err)
	}
	return k.add(auths)
}

func (k *Keyring) add(auths map[string]dockerConfigEntry) error {
	var entries []keyringEntry
	for key, e := range auths {
		cred := Credential{Username: e.Username, Password: e.Password, IdentityToken: e.IdentityToken}
		if e.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(e.Auth)
			if err != nil {
				return fmt.Errorf("credentials for %q: auth is not base64: %w", key, err)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok {
				return fmt.Errorf("credentials for %q: auth is not user:password", key)
			}
			cred.Username, cred.Password = user, pass
		}
		host, path := normalizeKey(key)
		if host == "" {
			continue
		}
		entries = append(entries, keyringEntry{host: host, path: path, cred: cred})
	}
	// The kubelet orders keys in reverse lexical order, which puts a longer
	// key (a path under a host) before its prefix.
	slices.SortFunc(entries, func(a, b keyringEntry) int {
		return strings.Compare(b.host+b.path, a.host+a.path)
	})
	k.sources = append(k.sources, entries)
	return nil
}

// Lookup returns the credentials to try for image, most relevant first and
// without duplicates; none means anonymous access.
func (k *Keyring) Lookup(image string) Auth {
	host, path := imageHostPath(image)
	var out Auth
	for _, src := range k.sources {
		for _, e := range src {
			if matches(e, host, path) && !slices.Contains(out, e.cred) {
				out = append(out, e.cred)
			}
		}
	}
	return out
}

// normalizeKey turns a docker config key ("https://index.docker.io/v1/",
// "registry:5000", "*.example.com/team") into a host and a path.
func normalizeKey(key string) (host, path string) {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	key = strings.TrimSuffix(key, "/")
	for _, api := range []string{"/v1", "/v2"} {
		key = strings.TrimSuffix(key, api)
	}
	host, path, _ = strings.Cut(key, "/")
	switch host {
	case "index.docker.io", "registry-1.docker.io":
		host = dockerHub
	}
	return host, path
}

// imageHostPath splits an image reference into its registry host and its
// repository path, normalized as the kubelet does ("busybox" is
// docker.io/library/busybox).
func imageHostPath(image string) (host, path string) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		host, path, _ = strings.Cut(image, "/")
		return host, path
	}
	return reference.Domain(named), reference.Path(named)
}

// matches applies a key to an image: each dot-separated part of the host
// may be a glob, ports must be equal, and the key's path must be the
// image's path or a parent of it.
func matches(e keyringEntry, host, path string) bool {
	globHost, globPort, _ := strings.Cut(e.host, ":")
	imgHost, imgPort, _ := strings.Cut(host, ":")
	if globPort != imgPort {
		return false
	}
	globParts, imgParts := strings.Split(globHost, "."), strings.Split(imgHost, ".")
	if len(globParts) != len(imgParts) {
		return false
	}
	for i := range globParts {
		if ok, err := filepath.Match(globParts[i], imgParts[i]); err != nil || !ok {
			return false
		}
	}
	return e.path == "" || path == e.path || strings.HasPrefix(path, e.path+"/")
}
