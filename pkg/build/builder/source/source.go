// Package source fetches the source of a Docker build into a directory: a
// Git repository (with a ref and a context directory, and the credentials
// of a source secret), an inline Dockerfile, or a binary archive streamed to
// the build, and checks that the context directory and the Dockerfile are
// where the Build says. Failures carry the reasons OpenShift's builder
// records: FetchSourceFailed (with git's own error), InvalidContextDirectory
// and ManageDockerfileFailed.
package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// DefaultSecretDir is where OpenShift mounts a build's source secret in the
// build pod.
const DefaultSecretDir = "/var/run/secrets/openshift.io/source" //nolint:gosec // a mount path, not a credential

// Error is a source failure with the reason a Build's status records.
type Error struct {
	// Reason is FetchSourceFailed, InvalidContextDirectory or
	// ManageDockerfileFailed.
	Reason buildv1.StatusReason
	// Err says what went wrong.
	Err error
}

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

func fetchFailed(format string, args ...any) *Error {
	return &Error{Reason: buildv1.StatusReasonFetchSourceFailed, Err: fmt.Errorf(format, args...)}
}

// Options say what to fetch.
type Options struct {
	// Source is the Build's spec.source.
	Source buildv1.BuildSource
	// Revision is the Build's spec.revision: when it names a Git commit,
	// that commit is checked out instead of Source.Git.Ref, so that every
	// platform of a build builds the same commit.
	Revision *buildv1.SourceRevision
	// DockerfilePath is the Docker strategy's dockerfilePath, relative to
	// the context directory. Default: Dockerfile.
	DockerfilePath string
	// NoDockerfile fetches a source that needs no Dockerfile (a Source
	// strategy's): Fetched.Dockerfile is "", unless the source has an
	// inline Dockerfile, which is written as for a Docker build (OpenShift
	// writes it into every strategy's source).
	NoDockerfile bool
	// SecretDir is the directory the source secret is mounted in (keys
	// username, password, ssh-privatekey, known_hosts, ca.crt,
	// .gitconfig). Empty means no secret.
	SecretDir string
	// SecretsDir and ConfigMapsDir are where the Build's spec.source.secrets
	// and spec.source.configMaps are mounted, one directory per name.
	// Default: DefaultBuildSecretsDir and DefaultBuildConfigMapsDir.
	SecretsDir, ConfigMapsDir string
	// Binary is the archive (tar, optionally gzip or bzip2 compressed, or
	// zip) or file of a Binary source.
	Binary io.Reader
	// Out receives progress lines.
	Out io.Writer
	// AllowFileGitURIs lets a Git source name a local repository (file://
	// or a path), which git reads inside the builder. Off in clusters
	// (build-controller's allowFileGitURIs); tests serve repositories so.
	AllowFileGitURIs bool
	// ArchiveLimits bound a Binary source. Zero fields take
	// DefaultArchiveLimits.
	ArchiveLimits ArchiveLimits
}

// Fetched is a source ready to build.
type Fetched struct {
	// Root is the directory the source was fetched into.
	Root string
	// ContextDir is the build context: Root joined with the source's
	// contextDir.
	ContextDir string
	// Dockerfile is the Dockerfile's path.
	Dockerfile string
	// Revision is the Git commit checked out; nil for other sources.
	Revision *buildv1.SourceRevision
}

// Type returns the kind of source: spec.source.type, or when that is unset,
// what the fields that are set say (as OpenShift infers it).
func Type(s buildv1.BuildSource) buildv1.BuildSourceType {
	switch {
	case s.Type != "":
		return s.Type
	case s.Git != nil:
		return buildv1.BuildSourceGit
	case s.Binary != nil:
		return buildv1.BuildSourceBinary
	case s.Dockerfile != nil:
		return buildv1.BuildSourceDockerfile
	}
	return buildv1.BuildSourceNone
}

// Fetch fetches the source into dir (which must be empty or not exist) and
// checks the context directory and the Dockerfile. Failures are *Error
// values.
func Fetch(ctx context.Context, opts Options, dir string) (Fetched, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Fetched{}, fetchFailed("creating the source directory: %w", err)
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return Fetched{}, fetchFailed("source directory: %w", err)
	}
	fetched := Fetched{Root: root}
	switch t := Type(opts.Source); t {
	case buildv1.BuildSourceGit:
		if opts.Source.Git == nil {
			return Fetched{}, fetchFailed("source type Git has no git repository")
		}
		if fetched.Revision, err = fetchGit(ctx, opts, root, out); err != nil {
			return Fetched{}, err
		}
	case buildv1.BuildSourceBinary:
		if opts.Binary == nil {
			return Fetched{}, fetchFailed("source type Binary, but no binary input was given to the build")
		}
		asFile := ""
		if opts.Source.Binary != nil {
			asFile = opts.Source.Binary.AsFile
		}
		if err := extractBinary(opts.Binary, asFile, root, opts.ArchiveLimits); err != nil {
			return Fetched{}, fetchFailed("extracting the binary input: %w", err)
		}
	case buildv1.BuildSourceDockerfile, buildv1.BuildSourceNone:
	default:
		return Fetched{}, fetchFailed("source type %q is not supported", t)
	}

	if fetched.ContextDir, err = contextDir(root, opts.Source.ContextDir); err != nil {
		return Fetched{}, err
	}
	secretsDir, configMapsDir := opts.SecretsDir, opts.ConfigMapsDir
	if secretsDir == "" {
		secretsDir = DefaultBuildSecretsDir
	}
	if configMapsDir == "" {
		configMapsDir = DefaultBuildConfigMapsDir
	}
	if err := copyInputs(fetched.ContextDir, opts.Source, secretsDir, configMapsDir); err != nil {
		return Fetched{}, err
	}
	if opts.NoDockerfile && opts.Source.Dockerfile == nil {
		return fetched, nil
	}
	if fetched.Dockerfile, err = dockerfile(fetched.ContextDir, root, opts); err != nil {
		return Fetched{}, err
	}
	return fetched, nil
}

// contextDir returns root joined with the Build's contextDir, which must be
// a directory inside root.
func contextDir(root, rel string) (string, error) {
	clean := filepath.Clean("/" + rel)
	dir := filepath.Join(root, clean)
	invalid := func(format string, args ...any) error {
		return &Error{Reason: buildv1.StatusReasonInvalidContextDirectory, Err: fmt.Errorf(format, args...)}
	}
	if !filepath.IsLocal(strings.TrimPrefix(clean, "/")) && clean != "/" {
		return "", invalid("contextDir %q is not a directory inside the source", rel)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return "", fetchFailed("opening the source: %w", err)
	}
	defer func() { _ = r.Close() }()
	name := strings.TrimPrefix(clean, "/")
	if name == "" {
		name = "."
	}
	info, err := r.Stat(name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", invalid("contextDir %q does not exist in the source", rel)
	case err != nil:
		return "", invalid("contextDir %q: %v", rel, err)
	case !info.IsDir():
		return "", invalid("contextDir %q is not a directory", rel)
	}
	// A symbolic link that leads out of the source fails OpenRoot's Stat
	// above; resolve the rest for buildah.
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", invalid("contextDir %q: %v", rel, err)
	}
	return resolved, nil
}

// dockerfile writes an inline Dockerfile into the context directory, or
// finds the source's own, and returns its path.
func dockerfile(ctxDir, root string, opts Options) (string, error) {
	rel := opts.DockerfilePath
	if rel == "" {
		rel = "Dockerfile"
	}
	manage := func(format string, args ...any) error {
		return &Error{Reason: buildv1.StatusReasonManageDockerfileFailed, Err: fmt.Errorf(format, args...)}
	}
	clean := filepath.Clean(rel)
	if filepath.IsAbs(clean) || !filepath.IsLocal(clean) {
		return "", manage("dockerfilePath %q must be a relative path inside the context directory", rel)
	}
	r, err := os.OpenRoot(ctxDir)
	if err != nil {
		return "", manage("opening the context directory: %v", err)
	}
	defer func() { _ = r.Close() }()
	if opts.Source.Dockerfile != nil {
		if err := r.MkdirAll(filepath.Dir(clean), 0o755); err != nil {
			return "", manage("writing the Dockerfile: %v", err)
		}
		if err := r.WriteFile(clean, []byte(*opts.Source.Dockerfile), 0o644); err != nil {
			return "", manage("writing the Dockerfile: %v", err)
		}
		return filepath.Join(ctxDir, clean), nil
	}
	info, err := r.Stat(clean)
	switch {
	case errors.Is(err, os.ErrNotExist):
		where := "the source's root"
		if opts.Source.ContextDir != "" {
			where = fmt.Sprintf("contextDir %q", opts.Source.ContextDir)
		}
		return "", manage("no Dockerfile %q in %s", rel, where)
	case err != nil:
		return "", manage("Dockerfile %q: %v", rel, err)
	case info.IsDir():
		return "", manage("Dockerfile %q is a directory", rel)
	}
	return filepath.Join(ctxDir, clean), nil
}
