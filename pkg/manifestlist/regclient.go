package manifestlist

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/pkg/docker/config"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/pkg/tlsclientconfig"
	"go.podman.io/image/v5/types"
)

// requestTimeout bounds each request to a registry or its token server.
const requestTimeout = 60 * time.Second

// certDirs hold per-registry CA certificates and client keys
// (<dir>/<host:port>/*.crt, *.cert, *.key), as containers/image reads them.
var certDirs = []string{"/etc/containers/certs.d", "/etc/docker/certs.d"}

// registryClient sends requests to one repository of a registry's API,
// authenticating as the distribution spec asks: a request answered 401
// carries a WWW-Authenticate challenge, Basic (send the credentials) or
// Bearer (trade the credentials for a token at the challenge's realm, for
// the challenge's scope), and is sent again once with the result.
//
// It exists for what containers/image does not offer: removing a tag.
// Credentials are found the way containers/image finds them.
type registryClient struct {
	repo   reference.Named
	host   string // API endpoint, host[:port]
	scheme string // "https", or "http" for an insecure registry that has no TLS
	http   *http.Client
	creds  types.DockerAuthConfig
	// credSource names where creds came from, for messages.
	credSource string
	// authz is the Authorization header that last worked.
	authz string
}

// newRegistryClient finds repo's registry, credentials and TLS settings and
// checks that the registry answers.
func newRegistryClient(ctx context.Context, access Access, repo reference.Named) (*registryClient, error) {
	sys := access.SystemContext()
	domain := reference.Domain(repo)
	host := domain
	if host == "docker.io" {
		host = "registry-1.docker.io" // where Docker Hub's API is served
	}
	insecure := access.Insecure
	if reg, err := sysregistriesv2.FindRegistry(sys, repo.Name()); err == nil && reg != nil && reg.Insecure {
		insecure = true
	}
	creds, err := config.GetCredentialsForRef(sys, repo)
	if err != nil {
		return nil, fmt.Errorf("reading credentials for %s: %w", repo.Name(), err)
	}
	tlsConfig := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Only for registries the user marked insecure, as containers/image does.
		InsecureSkipVerify: insecure, //nolint:gosec // insecure registries are the user's explicit choice
	}
	for _, dir := range certDirs {
		if err := tlsclientconfig.SetupCertificates(filepath.Join(dir, domain), tlsConfig); err != nil {
			return nil, fmt.Errorf("reading the certificates for %s: %w", domain, err)
		}
	}
	c := &registryClient{
		repo: repo,
		host: host,
		http: &http.Client{
			Timeout: requestTimeout,
			Transport: &http.Transport{
				Proxy:               http.ProxyFromEnvironment,
				TLSClientConfig:     tlsConfig,
				TLSHandshakeTimeout: 10 * time.Second,
				ForceAttemptHTTP2:   true,
			},
		},
		creds:      creds,
		credSource: "the default credential files",
	}
	if access.AuthFile != "" {
		c.credSource = access.AuthFile
	}
	if err := c.ping(ctx, insecure); err != nil {
		return nil, err
	}
	return c, nil
}

// ping finds the scheme the registry speaks: HTTPS, or for an insecure
// registry plain HTTP when HTTPS fails, as containers/image does.
func (c *registryClient) ping(ctx context.Context, insecure bool) error {
	schemes := []string{"https"}
	if insecure {
		schemes = append(schemes, "http")
	}
	var errs []error
	for _, scheme := range schemes {
		resp, err := c.send(ctx, http.MethodGet, scheme+"://"+c.host+"/v2/", "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
			c.scheme = scheme
			return nil
		}
		errs = append(errs, fmt.Errorf("GET %s://%s/v2/ answered %s, not a registry API", scheme, c.host, resp.Status))
	}
	return fmt.Errorf("reaching registry %s: %w", c.host, errors.Join(errs...))
}

// send sends one request with the given Authorization header (none if "").
func (c *registryClient) send(ctx context.Context, method, target, authz string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", userAgent)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	return c.http.Do(req)
}

// do sends a request for path (starting /v2/) to the registry,
// authenticating when the registry asks. action is what the request does to
// the repository (pull, push, delete), for a token whose challenge names no
// scope. The caller closes the body.
func (c *registryClient) do(ctx context.Context, method, path, action string) (*http.Response, error) {
	target := c.scheme + "://" + c.host + path
	resp, err := c.send(ctx, method, target, c.authz)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	challenges := parseChallenges(resp.Header.Values("WWW-Authenticate"))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	authz, err := c.authorize(ctx, challenges, "repository:"+reference.Path(c.repo)+":"+action)
	if err != nil {
		return nil, err
	}
	resp, err = c.send(ctx, method, target, authz)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		msg := registryMessage(resp)
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %s%s: the registry refused the credentials for %s from %s",
			method, path, resp.Status, msg, reference.Domain(c.repo), c.credSource)
	}
	c.authz = authz
	return resp, nil
}

// authorize answers a 401's challenges: a Bearer token if the registry
// offers token authentication, else Basic credentials.
func (c *registryClient) authorize(ctx context.Context, challenges []challenge, scope string) (string, error) {
	for _, ch := range challenges {
		if ch.scheme == "bearer" {
			return c.bearer(ctx, ch, scope)
		}
	}
	for _, ch := range challenges {
		if ch.scheme == "basic" {
			if c.creds.Username == "" && c.creds.Password == "" {
				return "", fmt.Errorf("registry %s requires credentials, and %s has none for %s",
					c.host, c.credSource, c.repo.Name())
			}
			return "Basic " + base64.StdEncoding.EncodeToString([]byte(c.creds.Username+":"+c.creds.Password)), nil
		}
	}
	if len(challenges) == 0 {
		return "", fmt.Errorf("registry %s answered 401 without saying how to authenticate (no WWW-Authenticate header)", c.host)
	}
	return "", fmt.Errorf("registry %s asks for %s authentication, which archway does not speak", c.host, challenges[0].scheme)
}

// bearer obtains a token from the challenge's realm, per the distribution
// token authentication spec: with an identity token, the OAuth2 refresh-token
// grant (POST); else a GET with the username and password as Basic
// credentials (or none, for anonymous access).
func (c *registryClient) bearer(ctx context.Context, ch challenge, defaultScope string) (string, error) {
	realm := ch.params["realm"]
	if realm == "" {
		return "", fmt.Errorf("registry %s asked for a bearer token without naming a realm", c.host)
	}
	realmURL, err := url.Parse(realm)
	if err != nil || (realmURL.Scheme != "https" && realmURL.Scheme != "http") {
		return "", fmt.Errorf("registry %s named token realm %q, which is not an http(s) URL", c.host, realm)
	}
	scopes := strings.Fields(ch.params["scope"])
	if len(scopes) == 0 {
		scopes = []string{defaultScope}
	}
	service := ch.params["service"]

	var req *http.Request
	if c.creds.IdentityToken != "" {
		form := url.Values{}
		form.Set("grant_type", "refresh_token")
		form.Set("refresh_token", c.creds.IdentityToken)
		form.Set("client_id", userAgent)
		if service != "" {
			form.Set("service", service)
		}
		form.Set("scope", strings.Join(scopes, " "))
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, realmURL.String(), strings.NewReader(form.Encode()))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		q := realmURL.Query()
		if service != "" {
			q.Set("service", service)
		}
		for _, s := range scopes {
			q.Add("scope", s)
		}
		if c.creds.Username != "" {
			q.Set("account", c.creds.Username)
		}
		realmURL.RawQuery = q.Encode()
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, realmURL.String(), nil)
		if err != nil {
			return "", err
		}
		if c.creds.Username != "" || c.creds.Password != "" {
			req.SetBasicAuth(c.creds.Username, c.creds.Password)
		}
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("requesting a token from %s: %w", realmURL.Host, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return "", fmt.Errorf("the token server %s refused the credentials for %s from %s: %s%s",
			realmURL.Host, reference.Domain(c.repo), c.credSource, resp.Status, registryMessage(resp))
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("requesting a token from %s: %s%s", realmURL.Host, resp.Status, registryMessage(resp))
	}
	var body struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return "", fmt.Errorf("reading the token from %s: %w", realmURL.Host, err)
	}
	token := body.Token
	if token == "" {
		token = body.AccessToken
	}
	if token == "" {
		return "", fmt.Errorf("the token server %s answered without a token", realmURL.Host)
	}
	return "Bearer " + token, nil
}
