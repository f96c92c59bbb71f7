// Package image builds one platform's image from a Dockerfile with the
// buildah library, pushes it, and reads the pushed image back from the
// registry.
//
// It runs buildah the way archway's build pods and machines allow (no
// systemd, no CAP_SYS_RESOURCE, nothing under /etc/containers): a container
// store of its own under a work directory, chroot isolation, the host's
// network with a stub network backend (no netavark or CNI), ulimits pinned to
// the current hard limits (raising them needs CAP_SYS_RESOURCE), and a
// signature policy and registries.conf written into the work directory so
// that nothing depends on /etc/containers: the registries.conf holds the
// cluster's registry configuration (Config.Registries: mirrors, blocked and
// insecure registries) and the insecure registries of each operation. Programs that use it must call
// buildah.InitReexec first thing in main (and in TestMain), as chroot
// isolation re-executes the program.
package image

import (
	"context"
	"crypto/sha256"
	_ "embed" // The signature policy is embedded.
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/types"
	"go.podman.io/storage"
	"go.podman.io/storage/pkg/ioutils"
	"golang.org/x/sys/unix"

	"github.com/archway-build/archway/pkg/registry"
)

var (
	//go:embed config/policy.json
	policyJSON []byte
)

// Config configures a Builder.
type Config struct {
	// WorkDir holds the container store, the configuration files, the blob
	// info cache and temporary files. Required. It should not be on
	// overlayfs when StorageDriver is overlay.
	WorkDir string

	// StorageDir is the container store's root (its images and layers).
	// Default: a directory in WorkDir. The store's run root is always in
	// WorkDir.
	StorageDir string

	// StorageDriver is the container store's driver: "overlay", "vfs", or
	// empty for overlay when the work directory supports it, else vfs.
	StorageDriver string

	// InsecureRegistries are registries ("host" or "host:port") reached over
	// plain HTTP or without TLS verification, as registry.Access has them
	// (loopback registries always are).
	InsecureRegistries []string

	// CertDir holds registry CA certificates and client keys,
	// <CertDir>/<host[:port]>/*.crt, trusted besides the system's roots
	// (registry.Access.CertDir); "": containers/image's defaults.
	CertDir string

	// Registries are the cluster's registry configuration, as
	// build-controller generates it for placement and builds (see
	// registry.ParseConf): mirrors (each for digest references, tag
	// references or both), blocked and insecure registries. Builds pull
	// through the mirrors as a node's CRI-O does, and refuse an image on a
	// blocked registry that no mirror serves (a *BlockedError). Empty:
	// every image from its own registry.
	Registries []sysregistriesv2.Registry

	// AllowedRegistries, when set, are the only registry scopes images
	// may be read from (OpenShift's image config allowedRegistries:
	// "host[:port][/path]" or "*.domain"): the build's signature policy
	// rejects every other registry, mirrors or not, and a base from one is
	// a *BlockedError (NotAllowed). Empty: every registry.
	AllowedRegistries []string

	// SignaturePolicyPath is a signature policy to use instead of the
	// embedded one, which accepts every image (or the one of
	// AllowedRegistries).
	SignaturePolicyPath string

	// Isolation is how RUN steps run: IsolationChroot (the default), which
	// needs nothing but the builder, or IsolationOCI, which runs each step
	// in a container of the OCI runtime at OCIRuntime. OCI isolation needs
	// root outside any user namespace; it starts a step with less work than
	// chroot isolation, which copies the builder's binary into memory twice
	// per step (storage's re-exec protection).
	Isolation Isolation
	// OCIRuntime is the path of the OCI runtime (runc) for IsolationOCI.
	OCIRuntime string

	// Disposable says the store and the work directory are thrown away
	// after the builds (a build pod's emptyDir volumes, a local build
	// without a kept work directory), so writing them durably buys
	// nothing: the store's metadata (its images', containers' and mounts'
	// records) is written without fsync, its containers are transient, and
	// the blob info cache (an SQLite database that containers/image syncs
	// after every transaction) is kept in memory-backed /dev/shm when that
	// is writable. An unclean stop of the process loses nothing the page
	// cache holds; only a crash of the machine could leave the store
	// inconsistent, and then nobody reads it again. Measured on a cold
	// four-platform build with one RUN step: 421 fdatasync calls on disk
	// without, 20 with (the layer records of images, which
	// containers/storage always syncs, and buildah's temporary files); the
	// blob info cache's go to tmpfs, where they cost nothing. Not syncing
	// is set for the whole process: every store a process with a
	// disposable builder opens is written without fsync.
	Disposable bool
}

// Isolation is how a build runs its RUN steps.
type Isolation string

// The isolations a Builder supports.
const (
	// IsolationChroot runs each step in a chroot with namespaces of its
	// own, through the builder's own binary.
	IsolationChroot Isolation = "chroot"
	// IsolationOCI runs each step in a container of an OCI runtime (runc).
	IsolationOCI Isolation = "oci"
)

// Builder builds, pushes and inspects images with one container store. It
// is safe for concurrent use: builds of several platforms may run at once.
// Close it on every path, or overlay mounts leak.
type Builder struct {
	cfg          Config
	store        storage.Store
	policyPath   string
	blobCacheDir string
	memCacheDir  string   // blobCacheDir when it was made in /dev/shm, removed by Close
	memCacheLock *os.File // holds memCacheDir's flock while the builder is open
	tmpDir       string
	confDir      string // registries.conf files, one per set of insecure registries
	emptyDir     string // stands in for /etc/containers/registries.d and registries.conf.d

	mu        sync.Mutex
	confFiles map[string]bool
	closeOnce sync.Once
	closeErr  error
}

// New creates the work directory's layout and opens its container store.
func New(cfg Config) (*Builder, error) {
	if cfg.WorkDir == "" {
		return nil, errors.New("imagebuild: a work directory is required")
	}
	workDir, err := filepath.Abs(cfg.WorkDir)
	if err != nil {
		return nil, err
	}
	cfg.WorkDir = workDir
	switch cfg.Isolation {
	case "":
		cfg.Isolation = IsolationChroot
	case IsolationChroot:
	case IsolationOCI:
		if cfg.OCIRuntime == "" {
			return nil, errors.New("imagebuild: OCI isolation needs the path of an OCI runtime (runc)")
		}
	default:
		return nil, fmt.Errorf("imagebuild: isolation %q: use chroot or oci", cfg.Isolation)
	}
	b := &Builder{
		cfg:          cfg,
		blobCacheDir: filepath.Join(workDir, "blob-info-cache"),
		tmpDir:       filepath.Join(workDir, "tmp"),
		confDir:      filepath.Join(workDir, "containers"),
		emptyDir:     filepath.Join(workDir, "containers", "empty.d"),
		confFiles:    map[string]bool{},
	}
	for _, dir := range []string{b.blobCacheDir, b.tmpDir, b.confDir, b.emptyDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("imagebuild: %w", err)
		}
	}
	b.policyPath = cfg.SignaturePolicyPath
	if b.policyPath == "" {
		policy := policyJSON
		if len(cfg.AllowedRegistries) > 0 {
			var err error
			if policy, err = registry.AllowedPolicy(cfg.AllowedRegistries); err != nil {
				return nil, fmt.Errorf("imagebuild: %w", err)
			}
		}
		b.policyPath = filepath.Join(b.confDir, "policy.json")
		if err := os.WriteFile(b.policyPath, policy, 0o600); err != nil {
			return nil, fmt.Errorf("imagebuild: %w", err)
		}
	}
	graphRoot := cfg.StorageDir
	if graphRoot == "" {
		graphRoot = filepath.Join(workDir, "storage", "root")
	}
	if cfg.Disposable {
		writeWithoutSync.Do(func() { ioutils.SetDefaultOptions(ioutils.AtomicFileWriterOptions{NoSync: true}) })
		if dir, lock, err := memoryCacheDir(); err == nil {
			b.blobCacheDir, b.memCacheDir, b.memCacheLock = dir, dir, lock
		}
	}
	if b.store, err = openStore(graphRoot, filepath.Join(workDir, "storage", "run"), cfg.StorageDriver, cfg.Disposable); err != nil {
		b.removeMemCache()
		return nil, err
	}
	return b, nil
}

// writeWithoutSync makes every container store of the process write its
// metadata without fsync, once a disposable builder is made.
var writeWithoutSync sync.Once

// memoryDir is where a disposable builder keeps its blob info cache: a
// tmpfs on Linux machines and in every Kubernetes pod.
const memoryDir = "/dev/shm"

// memoryCachePrefix begins the names of the blob info cache directories
// in memoryDir.
const memoryCachePrefix = "archway-blob-info-cache-"

// memoryCacheDir makes a blob info cache directory in memoryDir and locks
// it (an exclusive flock on the directory, held while the builder is open)
// after removing the directories of builders that ended without removing
// theirs, killed: those no process holds a lock on. Memory is not freed
// until the files go, and a killed builder never runs its Close.
func memoryCacheDir() (string, *os.File, error) {
	stale, _ := filepath.Glob(filepath.Join(memoryDir, memoryCachePrefix+"*"))
	for _, dir := range stale {
		if f, err := lockDir(dir); err == nil {
			_ = os.RemoveAll(dir)
			_ = f.Close()
		}
	}
	// Made under a name the sweep passes over, and named for it only once
	// locked: another builder's sweep never sees it unlocked.
	made, err := os.MkdirTemp(memoryDir, "."+memoryCachePrefix)
	if err != nil {
		return "", nil, err
	}
	f, err := lockDir(made)
	if err != nil {
		_ = os.RemoveAll(made)
		return "", nil, err
	}
	dir := filepath.Join(memoryDir, filepath.Base(made)[1:])
	if err := os.Rename(made, dir); err != nil {
		_ = os.RemoveAll(made)
		_ = f.Close()
		return "", nil, err
	}
	return dir, f, nil
}

// lockDir takes an exclusive flock on dir without waiting; the lock is
// held until the file returned is closed, or its process ends.
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// BlobInfoCacheDir is where containers/image keeps what it learnt of blobs
// (their digests compressed and not, the repositories known to hold
// them): in the work directory, or for a disposable builder in memory-backed
// /dev/shm, removed by Close.
func (b *Builder) BlobInfoCacheDir() string { return b.blobCacheDir }

// removeMemCache removes the blob info cache a disposable builder made in
// memoryDir; its work directory's are removed with the work directory.
func (b *Builder) removeMemCache() {
	if b.memCacheDir != "" {
		_ = os.RemoveAll(b.memCacheDir)
		_ = b.memCacheLock.Close()
	}
}

// openStore opens the container store in graphRoot and runRoot with
// driver, or with overlay falling back to vfs when driver is empty; a
// transient store keeps its containers' records in runRoot, unsynced.
func openStore(graphRoot, runRoot, driver string, transient bool) (storage.Store, error) {
	open := func(driver string) (storage.Store, error) {
		return storage.GetStore(storage.StoreOptions{
			RunRoot:         runRoot,
			GraphRoot:       graphRoot,
			GraphDriverName: driver,
			TransientStore:  transient,
		})
	}
	if driver != "" {
		store, err := open(driver)
		if err != nil {
			return nil, fmt.Errorf("imagebuild: opening the %s container store in %s: %w", driver, graphRoot, err)
		}
		return store, nil
	}
	store, err := open("overlay")
	if err == nil {
		return store, nil
	}
	store, vfsErr := open("vfs")
	if vfsErr != nil {
		return nil, fmt.Errorf("imagebuild: opening a container store in %s: overlay: %w; vfs: %w", graphRoot, err, vfsErr)
	}
	return store, nil
}

// Close shuts the container store down, unmounting every layer. It is safe
// to call more than once.
func (b *Builder) Close() error {
	b.closeOnce.Do(func() {
		if _, err := b.store.Shutdown(true); err != nil {
			b.closeErr = fmt.Errorf("imagebuild: shutting the container store down: %w", err)
		}
		b.removeMemCache()
	})
	return b.closeErr
}

// TempDir is the builder's directory for temporary files. Programs should
// point TMPDIR at it, as buildah writes some temporary files there.
func (b *Builder) TempDir() string { return b.tmpDir }

// Isolation is how the builder runs RUN steps.
func (b *Builder) Isolation() Isolation { return b.cfg.Isolation }

// StorageDriver is the driver of the builder's container store.
func (b *Builder) StorageDriver() string { return b.store.GraphDriverName() }

// systemContext returns the containers/image settings for an operation that
// touches the registries of refs, with the credentials of auth. The
// cluster's registries and the insecure ones go in a registries.conf,
// since a build pulls from and pushes to several registries at once.
func (b *Builder) systemContext(refs []string, auth registry.AuthFile) (*types.SystemContext, error) {
	access := registry.Access{AuthFile: auth, InsecureRegistries: b.cfg.InsecureRegistries, CertDir: b.cfg.CertDir, UserAgent: "archway-builder"}
	conf, err := b.registriesConf(access.InsecureHosts(slices.Concat(refs, b.mirrorHosts())...))
	if err != nil {
		return nil, err
	}
	sys := access.SystemContext("")
	sys.SignaturePolicyPath = b.policyPath
	sys.SystemRegistriesConfPath = conf
	sys.SystemRegistriesConfDirPath = b.emptyDir
	sys.RegistriesDirPath = b.emptyDir
	sys.UserShortNameAliasConfPath = filepath.Join(b.confDir, "short-name-aliases.conf")
	sys.BlobInfoCacheDir = b.blobCacheDir
	sys.BigFilesTemporaryDir = b.tmpDir
	return sys, nil
}

// mirrorHosts are the registries the cluster's configuration sends pulls
// to besides the images' own (mirrors, and locations a prefix is
// rewritten to), as "host/x" references: the insecure ones among them
// (loopback ones, as any registry the builder reaches) are marked so.
func (b *Builder) mirrorHosts() []string {
	var hosts []string
	add := func(location string) {
		if host, _, _ := strings.Cut(location, "/"); host != "" {
			hosts = append(hosts, host+"/x")
		}
	}
	for _, r := range b.cfg.Registries {
		add(r.Location)
		for _, m := range r.Mirrors {
			add(m.Location)
		}
	}
	return hosts
}

// registriesConf returns a registries.conf of the cluster's registries
// with insecure marked insecure (and what lies within them, as
// registry.InheritScopes does), unqualified names resolved on Docker Hub as
// docker and OpenShift's builder resolve them. Each set of insecure
// registries gets a file of its own: containers/image caches a
// registries.conf by path for the life of the process.
func (b *Builder) registriesConf(insecure []string) (string, error) {
	conf := sysregistriesv2.V2RegistriesConf{
		UnqualifiedSearchRegistries: []string{"docker.io"},
		ShortNameMode:               "permissive",
	}
	for _, r := range b.cfg.Registries {
		registry.MergeRegistry(&conf, r)
	}
	for _, host := range insecure {
		registry.MergeRegistry(&conf, sysregistriesv2.Registry{Prefix: host, Endpoint: sysregistriesv2.Endpoint{Location: host, Insecure: true}})
	}
	registry.InheritScopes(&conf)
	content, err := registry.EncodeConf(conf)
	if err != nil {
		return "", fmt.Errorf("imagebuild: writing registries.conf: %w", err)
	}
	sum := sha256.Sum256(content)
	path := filepath.Join(b.confDir, "registries-"+hex.EncodeToString(sum[:6])+".conf")

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.confFiles[path] {
		return path, nil
	}
	if err := os.WriteFile(path, content, 0o600); err != nil {
		return "", fmt.Errorf("imagebuild: %w", err)
	}
	b.confFiles[path] = true
	return path, nil
}

// contextErr prefers the context's error, which says why work stopped,
// over the error an interrupted operation returned.
func contextErr(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && err != nil {
		return fmt.Errorf("%w (%w)", ctxErr, err)
	}
	return err
}

// registryRepository returns the repository of an image reference, fully
// qualified (docker.io/library/busybox), or "" when ref is not a reference.
func registryRepository(ref string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ""
	}
	return named.Name()
}
