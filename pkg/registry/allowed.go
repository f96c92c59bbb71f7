package registry

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// ScopeAllows reports whether repo (a normalized repository name,
// host[:port]/path) lies within one of scopes, as containers/image's
// policy.json matches a docker reference: a scope is a repository or
// one of its namespaces ("quay.io", "quay.io/team"), or "*.domain" for
// every host under domain. No scopes allows every repository.
func ScopeAllows(scopes []string, repo string) bool {
	if len(scopes) == 0 {
		return true
	}
	var candidates []string
	for name := repo; ; {
		candidates = append(candidates, name)
		i := strings.LastIndex(name, "/")
		if i < 0 {
			break
		}
		name = name[:i]
	}
	host := candidates[len(candidates)-1]
	if i := strings.Index(host, ":"); i >= 0 {
		host = host[:i]
	}
	for {
		i := strings.Index(host, ".")
		if i < 0 {
			break
		}
		host = host[i+1:]
		candidates = append(candidates, "*."+host)
	}
	return slices.ContainsFunc(candidates, func(c string) bool { return slices.Contains(scopes, c) })
}

// policy is the part of a policy.json the allowed registries are written
// in and read from.
type policy struct {
	Default    []requirement                       `json:"default"`
	Transports map[string]map[string][]requirement `json:"transports,omitempty"`
}

type requirement struct {
	Type string `json:"type"`
}

// AllowedPolicy is a signature policy (policy.json) that lets images be
// read from the docker scopes of allowed alone (OpenShift's image config
// allowedRegistries) and rejects every other registry, mirrors or not,
// as OpenShift's nodes do; images of the local transports (the build's
// own store, archives, directories) are accepted.
func AllowedPolicy(allowed []string) ([]byte, error) {
	if len(allowed) == 0 {
		return nil, fmt.Errorf("no allowed registries: a policy allowing none would refuse every image")
	}
	accept := []requirement{{Type: "insecureAcceptAnything"}}
	p := policy{
		Default: []requirement{{Type: "reject"}},
		Transports: map[string]map[string][]requirement{
			"docker": {},
		},
	}
	for _, scope := range allowed {
		if scope == "" || strings.ContainsAny(scope, " \t\n@") {
			return nil, fmt.Errorf("allowed registry %q is not a registry scope (host[:port][/path] or *.domain)", scope)
		}
		p.Transports["docker"][scope] = accept
	}
	for _, local := range []string{"containers-storage", "oci", "oci-archive", "dir", "docker-archive"} {
		p.Transports[local] = map[string][]requirement{"": accept}
	}
	return json.MarshalIndent(p, "", "  ")
}

// PolicyAllowed returns the docker scopes the policy.json at path allows
// (one written by AllowedPolicy, or OpenShift's for its image config's
// allowedRegistries), and false when it rejects no registry by default
// (nothing is refused for its registry). path "": none.
func PolicyAllowed(path string) ([]string, bool, error) {
	if path == "" {
		return nil, false, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false, fmt.Errorf("the signature policy: %w", err)
	}
	var p policy
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, false, fmt.Errorf("the signature policy %s: %w", path, err)
	}
	if len(p.Default) == 0 || p.Default[0].Type != "reject" {
		return nil, false, nil
	}
	var allowed []string
	for scope, reqs := range p.Transports["docker"] {
		if len(reqs) > 0 && reqs[0].Type != "reject" {
			allowed = append(allowed, scope)
		}
	}
	slices.Sort(allowed)
	return allowed, true, nil
}
