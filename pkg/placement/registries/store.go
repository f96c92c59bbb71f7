package registries

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/distribution/reference"

	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/types"

	"github.com/archway-build/archway/pkg/registry"
)

// Settings are one generation of the configuration, written to files
// containers/image reads. They never change once made; a change makes new
// Settings in a directory of their own.
type Settings struct {
	// Generation counts the configurations a Store has made, from 1.
	Generation uint64
	// ConfPath is the generated registries.conf, and ConfDirPath an empty
	// drop-in directory, so that no registries.conf.d on the controller's
	// disk is merged in.
	ConfPath, ConfDirPath string
	// AuthFile is an empty auth file: what containers/image reads for a
	// mirror on another host than the image's, to which it does not send
	// the image's credentials; never the controller's own files.
	AuthFile string
	// CertDir is the certificate directory (<CertDir>/<host[:port]>/*.crt),
	// or "" when no CA is configured (containers/image's defaults).
	CertDir string
	// Conf is the configuration the files hold.
	Conf *Generated

	mu      sync.Mutex
	ensured map[string]bool
}

// SystemContext sets sys's registries.conf, drop-in directory, auth file
// and certificate directory to these settings'.
func (s *Settings) SystemContext(sys *types.SystemContext) {
	sys.SystemRegistriesConfPath = s.ConfPath
	sys.SystemRegistriesConfDirPath = s.ConfDirPath
	sys.AuthFilePath = s.AuthFile
	sys.DockerPerHostCertDirPath = s.CertDir
}

// Registry returns the registries.conf entry that applies to an image
// reference's repository, nil when none does. A repository outside the
// allowed registries (Generated.Allowed) gets a blocked entry of its host
// without mirrors: a node rejects its image whatever mirrors it has.
func (s *Settings) Registry(repo string) (*sysregistriesv2.Registry, error) {
	if !registry.ScopeAllows(s.Conf.Allowed, repo) {
		host, _, _ := strings.Cut(repo, "/")
		return &sysregistriesv2.Registry{Prefix: host, Endpoint: sysregistriesv2.Endpoint{Location: host}, Blocked: true}, nil
	}
	sys := &types.SystemContext{}
	s.SystemContext(sys)
	return sysregistriesv2.FindRegistry(sys, repo)
}

// CheckBlocked is registry.CheckBlocked with these settings: a
// *registry.BlockedError when ref is on a blocked registry that no mirror
// serves for it (for a pull), or outside the allowed registries.
func (s *Settings) CheckBlocked(ref string, push bool) error {
	if named, err := reference.ParseNormalizedNamed(ref); err == nil && !registry.ScopeAllows(s.Conf.Allowed, named.Name()) {
		return &registry.BlockedError{Image: ref, Registry: reference.Domain(named), NotAllowed: true, Push: push}
	}
	sys := &types.SystemContext{}
	s.SystemContext(sys)
	return registry.CheckBlocked(sys, ref, push)
}

// PrepareHosts makes sure each registry host ("host" or "host:port") has a
// certificate directory holding the trusted CA bundle, which
// containers/image reads per host. Hosts with a CA of their own have it
// from the start.
func (s *Settings) PrepareHosts(hosts ...string) error {
	if s.Conf.TrustedCA == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, host := range hosts {
		if s.ensured[host] {
			continue
		}
		if err := writeHostCerts(s.CertDir, host, s.Conf.TrustedCA, nil); err != nil {
			return err
		}
		s.ensured[host] = true
	}
	return nil
}

// writeHostCerts writes a host's certificate directory: the trusted
// bundle and its own. The host was checked by RegistryHost or comes from
// a parsed image reference, and os.Root keeps it inside dir regardless.
func writeHostCerts(dir, host string, trusted, own []byte) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	if err := root.Mkdir(host, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("certificate directory for %s: %w", host, err)
	}
	for name, data := range map[string][]byte{"trusted-ca.crt": trusted, "registry-ca.crt": own} {
		if data == nil {
			continue
		}
		if err := root.WriteFile(filepath.Join(host, name), data, 0o600); err != nil {
			return fmt.Errorf("certificate directory for %s: %w", host, err)
		}
	}
	return nil
}

// Store holds the current Settings and makes new ones from Generated
// configurations. Settings are written under a root directory, one
// subdirectory per generation; the two newest are kept, so that an
// inspection that began with the previous one can finish.
type Store struct {
	root        string
	mu          sync.RWMutex
	cur         *Settings
	prev        *Settings
	ready       chan struct{}
	subscribers []func(*Settings)
}

// NewStore returns a Store writing under root, which must exist.
func NewStore(root string) *Store {
	return &Store{root: root, ready: make(chan struct{})}
}

// Subscribe has fn called with the new Settings after each change, once
// they are current.
func (s *Store) Subscribe(fn func(*Settings)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subscribers = append(s.subscribers, fn)
}

// Current returns the current Settings, waiting until the first ones are
// made or ctx ends.
func (s *Store) Current(ctx context.Context) (*Settings, error) {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the registry configuration: %w", ctx.Err())
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur, nil
}

// Update writes gen as the next Settings, checks that containers/image
// loads it, and makes it current; on any error nothing changes. A gen equal
// to the current configuration changes nothing either: the current Settings
// are returned and the subscribers are not called.
func (s *Store) Update(gen *Generated) (*Settings, error) {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur != nil && reflect.DeepEqual(*cur.Conf, *gen) {
		// The same configuration again (a restart's first reconcile, an
		// unrelated change of a source): no new generation, so nothing
		// cached under the current one is forgotten.
		return cur, nil
	}
	next := uint64(1)
	if cur != nil {
		next = cur.Generation + 1
	}
	set, err := materialize(filepath.Join(s.root, strconv.FormatUint(next, 10)), next, gen)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	old := s.prev
	s.prev, s.cur = s.cur, set
	subs := append([]func(*Settings){}, s.subscribers...)
	first := s.prev == nil
	s.mu.Unlock()
	if old != nil {
		_ = os.RemoveAll(filepath.Dir(old.ConfPath))
	}
	// The first Settings are made ready after the subscribers ran, so no
	// inspection can begin with them and have its answer forgotten by a
	// subscriber's purge.
	for _, fn := range subs {
		fn(set)
	}
	if first {
		close(s.ready)
	}
	return set, nil
}

// materialize writes gen's files into dir and loads them once as
// containers/image will.
func materialize(dir string, generation uint64, gen *Generated) (*Settings, error) {
	_ = os.RemoveAll(dir) // left over from an update that failed
	if err := os.MkdirAll(filepath.Join(dir, "registries.conf.d"), 0o700); err != nil {
		return nil, err
	}
	set := &Settings{
		Generation:  generation,
		ConfPath:    filepath.Join(dir, "registries.conf"),
		ConfDirPath: filepath.Join(dir, "registries.conf.d"),
		AuthFile:    filepath.Join(dir, "auth.json"),
		Conf:        gen,
		ensured:     map[string]bool{},
	}
	fail := func(err error) (*Settings, error) {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	conf, err := registry.EncodeConf(gen.Conf)
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(set.ConfPath, conf, 0o600); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(set.AuthFile, []byte(`{"auths":{}}`), 0o600); err != nil {
		return fail(err)
	}
	if gen.TrustedCA != nil || len(gen.RegistryCAs) > 0 {
		set.CertDir = filepath.Join(dir, "certs.d")
		if err := os.Mkdir(set.CertDir, 0o700); err != nil {
			return fail(err)
		}
		for host, bundle := range gen.RegistryCAs {
			if err := writeHostCerts(set.CertDir, host, gen.TrustedCA, bundle); err != nil {
				return fail(err)
			}
			set.ensured[host] = true
		}
	}
	sys := &types.SystemContext{}
	set.SystemContext(sys)
	if _, err := sysregistriesv2.GetRegistries(sys); err != nil {
		return fail(fmt.Errorf("the generated registries.conf: %w", err))
	}
	return set, nil
}
