package plugin

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/trigger/paths"
)

// The environment variables that name build-triggers' Service (reached
// directly, not through the apiserver) and its CA when --build-endpoint
// and --build-endpoint-ca are not given.
const (
	EndpointEnv   = "ARCHWAY_BUILD_ENDPOINT"
	EndpointCAEnv = "ARCHWAY_BUILD_ENDPOINT_CA"
)

// binaryInput is one of --from-dir, --from-file, --from-archive and
// --from-repo (uploaded as the directory of its snapshot), and where the
// build's context is in it.
type binaryInput struct {
	dir, file, archive, repo string
	// exclude is --exclude: a regular expression of the paths (relative
	// to --from-dir, slash-separated) left out besides .git and the
	// ignore file's.
	exclude string
	context buildContext
}

func (b binaryInput) set() bool {
	return b.dir != "" || b.file != "" || b.archive != "" || b.repo != ""
}

func (b binaryInput) check() error {
	n := 0
	for _, s := range []string{b.dir, b.file, b.archive, b.repo} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return errors.New("give one of --from-dir, --from-file, --from-archive and --from-repo")
	}
	if b.exclude != "" {
		if b.dir == "" {
			return errors.New("--exclude leaves files of --from-dir out: give it with --from-dir")
		}
		if _, err := regexp.Compile(b.exclude); err != nil {
			return fmt.Errorf("--exclude %q: %w", b.exclude, err)
		}
	}
	return nil
}

// open returns the body to upload and the asFile it is for: a gzipped tar
// of the directory, made as it is sent; the file as it is (asFile its
// name); or the archive as it is.
func (b binaryInput) open() (io.ReadCloser, string, error) {
	switch {
	case b.file != "":
		info, err := os.Stat(b.file)
		if err != nil {
			return nil, "", fmt.Errorf("--from-file: %w", err)
		}
		if !info.Mode().IsRegular() {
			return nil, "", fmt.Errorf("--from-file %s is not a file", b.file)
		}
		f, err := os.Open(b.file)
		return f, filepath.Base(b.file), err
	case b.archive != "":
		f, err := os.Open(b.archive)
		if err != nil {
			return nil, "", fmt.Errorf("--from-archive: %w", err)
		}
		return f, "", nil
	}
	info, err := os.Stat(b.dir)
	if err != nil {
		return nil, "", fmt.Errorf("--from-dir: %w", err)
	}
	if !info.IsDir() {
		return nil, "", fmt.Errorf("--from-dir %s is not a directory", b.dir)
	}
	root, err := os.OpenRoot(b.dir)
	if err != nil {
		return nil, "", fmt.Errorf("--from-dir: %w", err)
	}
	filter, err := newUploadFilter(root, b.context)
	if err != nil {
		_ = root.Close()
		return nil, "", fmt.Errorf("--from-dir: %w", err)
	}
	if b.exclude != "" {
		if filter.exclude, err = regexp.Compile(b.exclude); err != nil {
			_ = root.Close()
			return nil, "", fmt.Errorf("--exclude %q: %w", b.exclude, err)
		}
	}
	pr, pw := io.Pipe()
	go func() {
		defer func() { _ = root.Close() }()
		pw.CloseWithError(tarDir(pw, root, filter))
	}()
	return pr, "", nil
}

// tarDir writes the files, directories and symbolic links (as links) of
// root that filter lets through as a gzipped tar, names relative to root.
func tarDir(w io.Writer, root *os.Root, filter *uploadFilter) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	err := fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || name == "." {
			return err
		}
		skip, walk, err := filter.skip(name, d.IsDir())
		if err != nil {
			return err
		}
		if skip {
			if d.IsDir() && !walk {
				return fs.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = root.Readlink(name); err != nil {
				return err
			}
		} else if !info.Mode().IsRegular() && !info.IsDir() {
			return nil // sockets, devices, fifos: nothing a build reads
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(name)
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname, hdr.Uid, hdr.Gid = "", "", 0, 0
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := root.Open(name)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// endpoint is build-triggers' Service, reached directly (--build-endpoint),
// and the CA file to trust it with ("" for the system's roots). Without
// one, uploads and webhook URLs go through the apiserver (the aggregated
// API triggers.archway.dev).
type endpoint struct {
	url, caFile string
}

// resolve fills the endpoint from the environment; ok is false when none
// is set (the apiserver is used).
func (e endpoint) resolve() (_ endpoint, ok bool, _ error) {
	if e.url == "" {
		e.url = os.Getenv(EndpointEnv)
	}
	if e.caFile == "" {
		e.caFile = os.Getenv(EndpointCAEnv)
	}
	if e.url == "" {
		return e, false, nil
	}
	u, err := url.Parse(e.url)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return e, true, fmt.Errorf("--build-endpoint %q: use an https:// URL", e.url)
	}
	return e, true, nil
}

// uploadClient is an HTTP client to the endpoint that authenticates as the
// kubeconfig's user does to the apiserver, with a bearer token (a token, a
// token file, an exec or auth provider): client certificates prove who one
// is only to the apiserver that checks them.
func uploadClient(cfg *rest.Config, caFile string) (*http.Client, error) {
	if cfg.BearerToken == "" && cfg.BearerTokenFile == "" && cfg.ExecProvider == nil && cfg.AuthProvider == nil {
		return nil, errors.New("--build-endpoint uploads authenticate with your bearer token, and your kubeconfig's user has none " +
			"(client certificates cannot be passed on): upload through the apiserver (leave out --build-endpoint and $" + EndpointEnv + "), " +
			"or use a kubeconfig with a token (e.g. from `kubectl create token`) or an OIDC login")
	}
	up := rest.AnonymousClientConfig(cfg)
	up.BearerToken, up.BearerTokenFile = cfg.BearerToken, cfg.BearerTokenFile
	up.ExecProvider, up.AuthProvider, up.AuthConfigPersister = cfg.ExecProvider, cfg.AuthProvider, cfg.AuthConfigPersister
	up.TLSClientConfig = rest.TLSClientConfig{CAFile: caFile}
	up.Timeout = 0
	return rest.HTTPClientFor(up)
}

// uploadTarget is where an upload goes: the URL of the BuildConfig's
// instantiatebinary and the client that reaches it.
type uploadTarget struct {
	client *http.Client
	url    string
	// direct: to build-triggers' Service, not through the apiserver.
	direct bool
}

// newUploadTarget is the apiserver's path of the aggregated API, with
// kubectl's credentials (any kind), or with an endpoint OpenShift's path at
// it, with the bearer token.
func newUploadTarget(cfg *rest.Config, ep endpoint, ns, bc string) (uploadTarget, error) {
	ep, direct, err := ep.resolve()
	if err != nil {
		return uploadTarget{}, err
	}
	if direct {
		hc, err := uploadClient(cfg, ep.caFile)
		if err != nil {
			return uploadTarget{}, err
		}
		return uploadTarget{client: hc, url: strings.TrimSuffix(ep.url, "/") + paths.Binary(paths.OpenShiftPrefix, ns, bc), direct: true}, nil
	}
	api := rest.CopyConfig(cfg)
	api.Timeout = 0
	hc, err := rest.HTTPClientFor(api)
	if err != nil {
		return uploadTarget{}, err
	}
	base, _, err := rest.DefaultServerUrlFor(api)
	if err != nil {
		return uploadTarget{}, err
	}
	return uploadTarget{client: hc, url: strings.TrimSuffix(base.String(), "/") + paths.Binary(paths.AggregatedPrefix, ns, bc)}, nil
}

// startBinary uploads the input to the BuildConfig's instantiatebinary
// subresource, which stores it and starts the build; it returns the Build.
func startBinary(ctx context.Context, cfg *rest.Config, ep endpoint, ns, bc string, in binaryInput, req instantiate.Request) (*buildv1.Build, error) {
	target, err := newUploadTarget(cfg, ep, ns, bc)
	if err != nil {
		return nil, err
	}
	body, asFile, err := in.open()
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	q := url.Values{}
	if asFile != "" {
		q.Set("asFile", asFile)
	}
	if len(req.Platforms) > 0 {
		q.Set("platforms", strings.Join(req.Platforms, ","))
	}
	if len(req.PlatformsAllowedToFail) > 0 {
		q.Set("platformsAllowedToFail", strings.Join(req.PlatformsAllowedToFail, ","))
	}
	for _, e := range req.Env {
		q.Add("env", e.Name+"="+e.Value)
	}
	for _, e := range req.BuildArgs {
		q.Add("buildArg", e.Name+"="+e.Value)
	}
	if req.NoCache != nil {
		q.Set("noCache", strconv.FormatBool(*req.NoCache))
	}
	if r := req.Revision; r != nil && r.Git != nil {
		for k, v := range map[string]string{"commit": r.Git.Commit, "message": r.Git.Message,
			"authorName": r.Git.Author.Name, "authorEmail": r.Git.Author.Email,
			"committerName": r.Git.Committer.Name, "committerEmail": r.Git.Committer.Email} {
			if v != "" {
				q.Set("revision."+k, v)
			}
		}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, target.url+"?"+q.Encode(), body)
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/octet-stream")
	resp, err := target.client.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("uploading to %s: %w", target.url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusCreated {
		msg := strings.TrimSpace(string(data))
		var st struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &st) == nil && st.Message != "" {
			msg = st.Message
		}
		if !target.direct && resp.StatusCode == http.StatusNotFound && !strings.Contains(msg, "buildconfig") {
			msg += " (the apiserver serves no " + paths.APIServiceName + ": install build-triggers with its APIService, or upload to its Service with --build-endpoint)"
		}
		if !target.direct && resp.StatusCode == http.StatusGatewayTimeout {
			msg += " (the apiserver ends a request after its --request-timeout, 60s by default: upload straight to build-triggers with --build-endpoint)"
		}
		return nil, &uploadError{code: resp.StatusCode, msg: msg}
	}
	b := &buildv1.Build{}
	if err := json.Unmarshal(data, b); err != nil {
		return nil, fmt.Errorf("reading the started Build: %w", err)
	}
	return b, nil
}

// uploadError is the endpoint's refusal.
type uploadError struct {
	code int
	msg  string
}

func (e *uploadError) Error() string {
	return fmt.Sprintf("binary build refused (%d %s): %s", e.code, http.StatusText(e.code), e.msg)
}
