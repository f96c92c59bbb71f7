package registries

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"os"
	"path/filepath"

	"github.com/BurntSushi/toml"
	configv1 "github.com/openshift/api/config/v1"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/types"
)

// RegistriesConfKey is the key of the registries ConfigMap holding a
// registries.conf (version 2, TOML).
const RegistriesConfKey = "registries.conf"

// Inputs are the sources of the registry configuration.
type Inputs struct {
	// Base is a registries.conf read from a file (the registriesConfPath
	// option), merged first; empty: none.
	Base string
	// Conf is the registries ConfigMap's registries.conf, merged after Base.
	Conf string
	// DigestMirrorSets and TagMirrorSets are OpenShift's mirror sets.
	DigestMirrorSets []configv1.ImageDigestMirrorSet
	TagMirrorSets    []configv1.ImageTagMirrorSet
	// InsecureRegistries are hosts (or prefixes) marked insecure.
	InsecureRegistries []string
	// RegistryCAs is the per-registry CA ConfigMap's data: keys
	// "host" or "host..port", values PEM bundles.
	RegistryCAs map[string]string
	// TrustedCA is a PEM bundle trusted for every registry.
	TrustedCA string
}

// Generated is what Build makes of Inputs.
type Generated struct {
	// Conf is the registries.conf (v2) to resolve with.
	Conf sysregistriesv2.V2RegistriesConf
	// RegistryCAs are the validated per-registry CA bundles by "host" or
	// "host:port", as a certificate directory names them.
	RegistryCAs map[string][]byte
	// TrustedCA is the validated global CA bundle, nil when none.
	TrustedCA []byte
}

// InputError is configuration that cannot be used; Source says where it
// was found, so that the message says what to fix.
type InputError struct {
	Source string
	Err    error
}

func (e *InputError) Error() string { return e.Source + ": " + e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// Build merges inputs into one configuration. Registries are merged by
// prefix in the order Base, Conf, the insecure registries, the digest
// mirror sets, the tag mirror sets: a later source adds mirrors to an
// earlier entry with the same prefix and may mark it insecure or blocked,
// never the reverse. Credential helpers are dropped: credentials come from
// the pods' pull secrets only. An input that cannot be used is an
// *InputError naming it.
func Build(in Inputs) (*Generated, error) {
	var conf sysregistriesv2.V2RegistriesConf
	for _, src := range []struct{ name, text string }{{"registriesConfPath", in.Base}, {"the registries ConfigMap's " + RegistriesConfKey, in.Conf}} {
		if strings.TrimSpace(src.text) == "" {
			continue
		}
		parsed, err := ParseConf(src.text)
		if err != nil {
			return nil, &InputError{Source: src.name, Err: err}
		}
		for _, r := range parsed.Registries {
			merge(&conf, r)
		}
	}
	for _, host := range in.InsecureRegistries {
		if host == "" || host == "*" {
			continue // "*" is handled per request: it names no prefix
		}
		merge(&conf, sysregistriesv2.Registry{Prefix: host, Endpoint: sysregistriesv2.Endpoint{Location: host, Insecure: true}})
	}
	for _, r := range DigestMirrorRegistries(in.DigestMirrorSets) {
		merge(&conf, r)
	}
	for _, r := range TagMirrorRegistries(in.TagMirrorSets) {
		merge(&conf, r)
	}
	inheritScopes(&conf)
	sort.SliceStable(conf.Registries, func(i, j int) bool { return conf.Registries[i].Prefix < conf.Registries[j].Prefix })
	out := &Generated{Conf: conf}
	var err error
	if out.RegistryCAs, err = ParseRegistryCAs(in.RegistryCAs); err != nil {
		return nil, &InputError{Source: "the registry CA ConfigMap", Err: err}
	}
	if strings.TrimSpace(in.TrustedCA) != "" {
		if out.TrustedCA, err = parseBundle(in.TrustedCA); err != nil {
			return nil, &InputError{Source: "the trusted CA ConfigMap's " + TrustedCAKey, Err: err}
		}
	}
	return out, nil
}

// ParseConf reads a registries.conf (version 2). Keys it does not know are
// an error naming them (a misspelt key would otherwise be ignored); the
// keys for short names and credential helpers are accepted and dropped,
// since pods' images are fully qualified and credentials come from pull
// secrets. The result has passed containers/image's own checks.
func ParseConf(text string) (*sysregistriesv2.V2RegistriesConf, error) {
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
	out := &sysregistriesv2.V2RegistriesConf{Registries: conf.Registries}
	if err := check(out); err != nil {
		return nil, err
	}
	return out, nil
}

// merge adds r to conf: as a new entry, or onto the entry with the same
// prefix (its mirrors appended unless already there, insecure and blocked
// only ever turned on).
func merge(conf *sysregistriesv2.V2RegistriesConf, r sysregistriesv2.Registry) {
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

// inheritScopes applies an insecure or blocked registry to what lies
// within it, as OpenShift does when it writes the nodes' registries.conf:
// containers/image takes these settings from the one entry with the
// longest matching prefix, and from a mirror's own entry, so a repository
// entry (a mirror set's source) or a mirror inside an insecure registry
// would otherwise be reached over verified HTTPS, and a repository entry
// inside a blocked registry would be pulled from.
func inheritScopes(conf *sysregistriesv2.V2RegistriesConf) {
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

// Encode writes conf as a registries.conf; credential helpers are set to
// the auth file alone, so no helper program is ever run.
func Encode(conf sysregistriesv2.V2RegistriesConf) ([]byte, error) {
	conf.CredentialHelpers = []string{"containers-auth.json"}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(conf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// check runs containers/image's checks on conf (prefixes, locations,
// mirror settings, conflicting entries) by decoding its encoding the way
// containers/image loads a file.
func check(conf *sysregistriesv2.V2RegistriesConf) error {
	for _, r := range conf.Registries {
		if r.Prefix == "" && r.Location == "" {
			return errors.New("a [[registry]] has neither prefix nor location")
		}
	}
	data, err := Encode(*conf)
	if err != nil {
		return err
	}
	return loadCheck(data)
}

// loadCheck loads a registries.conf the way containers/image does, from a
// file of its own, and forgets it again.
func loadCheck(data []byte) error {
	dir, err := os.MkdirTemp("", "archway-registries-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "registries.conf")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	sys := &types.SystemContext{SystemRegistriesConfPath: path, SystemRegistriesConfDirPath: filepath.Join(dir, "registries.conf.d")}
	_, err = sysregistriesv2.GetRegistries(sys)
	sysregistriesv2.InvalidateCache()
	return err
}
