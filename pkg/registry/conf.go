package registry

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/types"
)

// The registries.conf (containers-registries.conf(5), version 2) archway
// reads and writes: the cluster's registry configuration that
// build-controller generates (pkg/placement/registries) and hands to build
// pods, and the file the builder writes from it. One set of rules for
// both, so that a build pulls through the mirrors placement inspects with.

// ParseConf reads a registries.conf (version 2). Keys it does not know are
// an error naming them (a misspelt key would otherwise be ignored); the
// keys for short names and credential helpers are accepted and dropped,
// since images in pods and builds are resolved by archway's own rules and
// credentials come from pull secrets. The result has passed
// containers/image's own checks.
func ParseConf(text string) (*sysregistriesv2.V2RegistriesConf, error) {
	out, err := DecodeConf(text)
	if err != nil {
		return nil, err
	}
	if err := checkConf(out); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeConf is ParseConf without containers/image's checks, which need a
// temporary directory: for a configuration ParseConf accepted before (the
// one a build pod is handed), checked again when it is loaded.
func DecodeConf(text string) (*sysregistriesv2.V2RegistriesConf, error) {
	var conf struct {
		sysregistriesv2.V2RegistriesConf
		Aliases map[string]string `toml:"aliases"`
	}
	md, err := toml.Decode(text, &conf)
	if err != nil {
		return nil, fmt.Errorf("not a registries.conf: %w", err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, 0, len(undecoded))
		for _, k := range undecoded {
			keys = append(keys, k.String())
		}
		return nil, fmt.Errorf("unknown keys %s (see containers-registries.conf(5), version 2)", strings.Join(keys, ", "))
	}
	return &sysregistriesv2.V2RegistriesConf{Registries: conf.Registries}, nil
}

// MergeRegistry adds r to conf: as a new entry, or onto the entry with the
// same prefix (its mirrors appended unless already there, insecure and
// blocked only ever turned on).
func MergeRegistry(conf *sysregistriesv2.V2RegistriesConf, r sysregistriesv2.Registry) {
	prefix := r.Prefix
	if prefix == "" {
		prefix = r.Location
	}
	r.Prefix = prefix
	i := slices.IndexFunc(conf.Registries, func(e sysregistriesv2.Registry) bool {
		p := e.Prefix
		if p == "" {
			p = e.Location
		}
		return p == prefix
	})
	if i < 0 {
		r.Mirrors = slices.Clone(r.Mirrors)
		conf.Registries = append(conf.Registries, r)
		return
	}
	e := &conf.Registries[i]
	e.Insecure = e.Insecure || r.Insecure
	e.Blocked = e.Blocked || r.Blocked
	if e.MirrorByDigestOnly != r.MirrorByDigestOnly || slices.ContainsFunc(r.Mirrors, func(m sysregistriesv2.Endpoint) bool { return m.PullFromMirror != "" }) {
		// containers/image refuses mirror-by-digest-only beside per-mirror
		// settings: say the same per mirror.
		perMirror(e)
		perMirror(&r)
	}
	for _, m := range r.Mirrors {
		if !slices.Contains(e.Mirrors, m) {
			e.Mirrors = append(e.Mirrors, m)
		}
	}
}

// InheritScopes applies an insecure or blocked registry to what lies
// within it, as OpenShift does when it writes the nodes' registries.conf:
// containers/image takes these settings from the one entry with the
// longest matching prefix, and from a mirror's own entry, so a repository
// entry (a mirror set's source) or a mirror inside an insecure registry
// would otherwise be reached over verified HTTPS, and a repository entry
// inside a blocked registry would be pulled from.
func InheritScopes(conf *sysregistriesv2.V2RegistriesConf) {
	within := func(loc, scope string) bool { return loc == scope || strings.HasPrefix(loc, scope+"/") }
	var insecure, blocked []string
	for _, r := range conf.Registries {
		if r.Location == "" {
			continue
		}
		if r.Insecure {
			insecure = append(insecure, r.Location)
		}
		if r.Blocked {
			blocked = append(blocked, r.Location)
		}
	}
	for i := range conf.Registries {
		r := &conf.Registries[i]
		for _, scope := range insecure {
			if r.Location != "" && within(r.Location, scope) {
				r.Insecure = true
			}
			for j := range r.Mirrors {
				if within(r.Mirrors[j].Location, scope) {
					r.Mirrors[j].Insecure = true
				}
			}
		}
		for _, scope := range blocked {
			if r.Location != "" && within(r.Location, scope) {
				r.Blocked = true
			}
		}
	}
}

// perMirror rewrites a registry's mirror-by-digest-only as the same
// setting on each of its mirrors.
func perMirror(r *sysregistriesv2.Registry) {
	if !r.MirrorByDigestOnly {
		return
	}
	r.MirrorByDigestOnly = false
	r.Mirrors = slices.Clone(r.Mirrors)
	for i := range r.Mirrors {
		r.Mirrors[i].PullFromMirror = sysregistriesv2.MirrorByDigestOnly
	}
}

// EncodeConf writes conf as a registries.conf; credential helpers are set
// to the auth file alone, so no helper program is ever run.
func EncodeConf(conf sysregistriesv2.V2RegistriesConf) ([]byte, error) {
	conf.CredentialHelpers = []string{"containers-auth.json"}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(conf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkConf runs containers/image's checks on conf (prefixes, locations,
// mirror settings, conflicting entries) by decoding its encoding the way
// containers/image loads a file.
func checkConf(conf *sysregistriesv2.V2RegistriesConf) error {
	for _, r := range conf.Registries {
		if r.Prefix == "" && r.Location == "" {
			return errors.New("a [[registry]] has neither prefix nor location")
		}
	}
	data, err := EncodeConf(*conf)
	if err != nil {
		return err
	}
	return CheckConf(data)
}

// CheckConf loads a registries.conf the way containers/image does, from a
// file of its own, and forgets it again.
func CheckConf(data []byte) error {
	dir, err := os.MkdirTemp("", "archway-registries-check-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	path := filepath.Join(dir, "registries.conf")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	sys := &types.SystemContext{SystemRegistriesConfPath: path, SystemRegistriesConfDirPath: filepath.Join(dir, "registries.conf.d")}
	_, err = sysregistriesv2.GetRegistries(sys)
	sysregistriesv2.InvalidateCache()
	return err
}
