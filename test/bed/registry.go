package bed

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"
	"golang.org/x/crypto/bcrypt"
)

// registryStartTimeout bounds how long a registry may take to answer when
// the caller's context has no deadline of its own.
const registryStartTimeout = 30 * time.Second

// Registry is a CNCF Distribution registry the bed runs on loopback.
type Registry struct {
	// Host is "127.0.0.1:<port>", the registry part of image references.
	Host string
	// Username and Password are set when the registry requires basic auth.
	Username, Password string
	// Dir is the registry's storage root.
	Dir string

	home   string // config.yml, htpasswd and the client's blob-info cache
	scheme string // "http", or "https" with RegistryOptions' TLS
	client *http.Client
	proc   *process
}

// RegistryOptions configure a registry Bed.StartRegistry runs.
type RegistryOptions struct {
	// TLSCert and TLSKey (PEM) make the registry serve HTTPS with them
	// (Distribution's http.tls); TLSCA (PEM) is what the bed's own client
	// trusts for it. Empty: plain HTTP.
	TLSCert, TLSKey, TLSCA []byte
	// Address is the IP the registry listens on (and Host names); empty
	// means 127.0.0.1.
	Address string
}

// StartRegistry runs one more registry on loopback (on the real node's
// address with Options.RealNode), stopped with the bed
// (or earlier with Stop).
func (b *Bed) StartRegistry(ctx context.Context, name string, opts RegistryOptions) (*Registry, error) {
	if opts.Address == "" && b.Node != nil {
		opts.Address = b.Node.IP
	}
	r, err := startRegistry(ctx, b.Dir, name, false, opts)
	if err != nil {
		return nil, fmt.Errorf("bed: registry %s: %w", name, err)
	}
	if b.Node != nil && b.Node.Dir != "" && len(opts.TLSCert) == 0 {
		if err := b.Node.writeRegistryHosts([]string{r.Host}); err != nil {
			return nil, err
		}
	}
	b.procs = append(b.procs, r.proc)
	return r, nil
}

// Stop stops the registry.
func (r *Registry) Stop() { r.proc.Stop() }

// HTTPClient is a client of the registry (TLS trusting its CA when it
// serves HTTPS), and URL the address of a path on it.
func (r *Registry) HTTPClient() *http.Client { return r.client }

// startRegistry runs the registry binary with its configuration and storage
// in dir/<name> and its log in dir/<name>.log, and waits until it answers.
// With auth, it requires htpasswd basic auth with generated credentials.
func startRegistry(ctx context.Context, dir, name string, auth bool, opts RegistryOptions) (*Registry, error) {
	binary, err := Tool("registry")
	if err != nil {
		return nil, err
	}
	home := filepath.Join(dir, name)
	r := &Registry{
		Dir:  filepath.Join(home, "data"),
		home: home,
		// No proxy: the registry is on this machine.
		scheme: "http",
		client: &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second},
	}
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return nil, err
	}
	tlsConfig := ""
	if len(opts.TLSCert) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(opts.TLSCA) {
			return nil, errors.New("RegistryOptions.TLSCA holds no certificate")
		}
		r.scheme = "https"
		r.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
		cert, key := filepath.Join(home, "tls.crt"), filepath.Join(home, "tls.key")
		if err := os.WriteFile(cert, opts.TLSCert, 0o600); err != nil {
			return nil, err
		}
		if err := os.WriteFile(key, opts.TLSKey, 0o600); err != nil {
			return nil, err
		}
		tlsConfig = fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", strconv.Quote(cert), strconv.Quote(key))
	}
	secret, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	authConfig := ""
	if auth {
		if r.Password, err = randomHex(16); err != nil {
			return nil, err
		}
		r.Username = "archway"
		// The registry checks the hash on every request: the minimum cost
		// keeps pulls fast, and the password is random and short-lived.
		hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.MinCost)
		if err != nil {
			return nil, err
		}
		htpasswd := filepath.Join(home, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(r.Username+":"+string(hash)+"\n"), 0o600); err != nil {
			return nil, err
		}
		authConfig = fmt.Sprintf("auth:\n  htpasswd:\n    realm: %s\n    path: %s\n",
			strconv.Quote("archway-bed"), strconv.Quote(htpasswd))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, registryStartTimeout)
		defer cancel()
	}
	// Another program may take the free port before the registry binds it:
	// then try another one.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := opts.Address
		if addr == "" {
			addr = "127.0.0.1"
		}
		r.Host = net.JoinHostPort(addr, strconv.Itoa(port))
		// Double-quoted scalars are JSON strings, which YAML reads the same way.
		config := fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  secret: %s
%s%s`, strconv.Quote(r.Dir), strconv.Quote(r.Host), strconv.Quote(secret), tlsConfig, authConfig)
		configPath := filepath.Join(home, "config.yml")
		if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
			return nil, err
		}
		r.proc, err = startProcess(name, dir, binary, []string{"serve", configPath}, []string{"OTEL_TRACES_EXPORTER=none"})
		if err != nil {
			return nil, err
		}
		if err = r.waitReady(ctx, auth); err == nil {
			return r, nil
		}
		r.proc.Stop()
		if attempt == 3 || !strings.Contains(tail(r.proc.logPath, 5), "address already in use") {
			return nil, err
		}
	}
}

// waitReady waits until the registry answers GET /v2/: 200, or 401 when it
// requires auth.
func (r *Registry) waitReady(ctx context.Context, auth bool) error {
	want := http.StatusOK
	if auth {
		want = http.StatusUnauthorized
	}
	return waitFor(ctx, r.proc, "the registry at "+r.Host, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url("/v2/"), nil)
		if err != nil {
			return err
		}
		resp, err := r.client.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			return fmt.Errorf("GET /v2/ answered %s, want %d", resp.Status, want)
		}
		return nil
	})
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func (r *Registry) url(path string) string {
	return r.scheme + "://" + r.Host + path
}

// URL is the address of path on the registry.
func (r *Registry) URL(path string) string { return r.url(path) }

// do sends one request to the registry API with r's credentials, if any.
func (r *Registry) do(ctx context.Context, method, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, r.url(path), nil)
	if err != nil {
		return nil, err
	}
	if r.Username != "" {
		req.SetBasicAuth(r.Username, r.Password)
	}
	req.Header.Set("Accept", strings.Join([]string{
		"application/vnd.oci.image.index.v1+json",
		"application/vnd.oci.image.manifest.v1+json",
		"application/vnd.docker.distribution.manifest.list.v2+json",
		"application/vnd.docker.distribution.manifest.v2+json",
	}, ", "))
	return r.client.Do(req)
}

// registryError turns an unexpected answer into an error that carries the
// registry's own explanation.
func registryError(method, path string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
}

// Tags lists the tags of repo, e.g. "archway/busybox". A repository that
// does not exist has no tags.
func (r *Registry) Tags(ctx context.Context, repo string) ([]string, error) {
	var tags []string
	path := "/v2/" + repo + "/tags/list"
	for path != "" {
		resp, err := r.do(ctx, http.MethodGet, path)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusNotFound && tags == nil {
			_ = resp.Body.Close()
			return []string{}, nil
		}
		if resp.StatusCode != http.StatusOK {
			err := registryError(http.MethodGet, path, resp)
			_ = resp.Body.Close()
			return nil, err
		}
		var page struct {
			Tags []string `json:"tags"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		_ = resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", path, err)
		}
		tags = append(tags, page.Tags...)
		path, err = nextPage(resp.Header.Get("Link"))
		if err != nil {
			return nil, err
		}
	}
	if tags == nil {
		tags = []string{}
	}
	return tags, nil
}

// nextPage reads the path of the next page from a Link header of the form
// `</v2/x/tags/list?last=a&n=1>; rel="next"`, or "" on the last page.
func nextPage(link string) (string, error) {
	if link == "" {
		return "", nil
	}
	target, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(link), "<"), ">")
	if !ok {
		return "", fmt.Errorf("unreadable Link header %q", link)
	}
	u, err := url.Parse(target)
	if err != nil {
		return "", fmt.Errorf("unreadable Link header %q: %w", link, err)
	}
	return u.RequestURI(), nil
}

// Untag removes tag from repo. The manifest it pointed at stays, with any
// other tags on it and any index that refers to it; deleting by digest
// would remove all of those.
func (r *Registry) Untag(ctx context.Context, repo, tag string) error {
	path := "/v2/" + repo + "/manifests/" + tag
	resp, err := r.do(ctx, http.MethodDelete, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return registryError(http.MethodDelete, path, resp)
	}
	return nil
}

// ManifestDigest returns the digest of the manifest or index that
// reference (a tag or a digest) names in repo.
func (r *Registry) ManifestDigest(ctx context.Context, repo, reference string) (string, error) {
	path := "/v2/" + repo + "/manifests/" + reference
	resp, err := r.do(ctx, http.MethodHead, path)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HEAD %s: %s", path, resp.Status)
	}
	return resp.Header.Get("Docker-Content-Digest"), nil
}

// AuthFile writes a docker config.json holding r's credentials into dir
// (for pull and push secrets, kubectl create secret generic
// --from-file=.dockerconfigjson=...) and returns its path.
func (r *Registry) AuthFile(dir string) (string, error) {
	if r.Username == "" {
		return "", errors.New("registry " + r.Host + " requires no credentials")
	}
	data, err := json.Marshal(map[string]any{
		"auths": map[string]any{
			r.Host: map[string]string{
				"auth": base64.StdEncoding.EncodeToString([]byte(r.Username + ":" + r.Password)),
			},
		},
	})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// SystemContext lets containers/image reach r: plain HTTP, r's credentials,
// and a blob-info cache of r's own rather than the machine's.
func (r *Registry) SystemContext() *types.SystemContext {
	sys := &types.SystemContext{
		DockerInsecureSkipTLSVerify: types.OptionalBoolTrue,
		BlobInfoCacheDir:            filepath.Join(r.home, "blob-info-cache"),
	}
	if r.Username != "" {
		sys.DockerAuthConfig = &types.DockerAuthConfig{Username: r.Username, Password: r.Password}
	}
	return sys
}

// CopyIndex pushes the whole image or index src (a reference on this
// registry, host included) as dst with its digests kept, its options changed
// by edit when it is not nil.
func (r *Registry) CopyIndex(ctx context.Context, src, dst string, edit func(*copy.Options)) error {
	srcRef, err := docker.ParseReference("//" + src)
	if err != nil {
		return err
	}
	dstRef, err := docker.ParseReference("//" + dst)
	if err != nil {
		return err
	}
	policy, err := signature.NewPolicyContext(&signature.Policy{Default: signature.PolicyRequirements{signature.NewPRInsecureAcceptAnything()}})
	if err != nil {
		return err
	}
	defer func() { _ = policy.Destroy() }()
	opts := &copy.Options{
		ImageListSelection: copy.CopyAllImages,
		PreserveDigests:    true,
		SourceCtx:          r.SystemContext(),
		DestinationCtx:     r.SystemContext(),
	}
	if edit != nil {
		edit(opts)
	}
	if _, err := copy.Image(ctx, policy, dstRef, srcRef, opts); err != nil {
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return nil
}

// NonLoopbackIP is an IPv4 address of this machine other than loopback,
// nil when it has none: a registry there is reached with TLS checks, which
// the builder skips for loopback registries as docker does.
func NonLoopbackIP() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.To4()
		}
	}
	return nil
}
