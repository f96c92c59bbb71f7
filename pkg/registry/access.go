// Package registry decides how archway reaches image registries: whose
// credentials it sends, which registries it reaches without TLS checks, and
// where it finds their CA certificates. Every caller (the builder's builds
// and pushes, the manifest list's push and untag, placement's image
// inspection) turns an Access into the containers/image SystemContext it
// uses, so that the rules below hold everywhere:
//
//   - Credentials come from explicit ones (Access.Credential: placement's
//     pull secrets, never anything on the controller's disk), else from a
//     docker config file whose format is decided by its content
//     (FindAuthFile: a legacy .dockercfg works under any name), else from
//     containers/image's default places.
//   - A registry is insecure (plain HTTP, or TLS without verification) when
//     Access.InsecureRegistries names it exactly ("host" or "host:port"), or
//     holds "*", or when it is on loopback (localhost, 127.0.0.0/8, ::1), as
//     docker treats loopback registries (unless Access.VerifyLoopback).
//   - CA certificates and client keys are read from <CertDir>/<host:port>/
//     (*.crt, *.cert, *.key); with no CertDir, from containers/image's
//     defaults (/etc/containers/certs.d, /etc/docker/certs.d).
package registry

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/pkg/tlsclientconfig"
	"go.podman.io/image/v5/types"
)

// AllRegistries in Access.InsecureRegistries makes every registry insecure.
const AllRegistries = "*"

// defaultUserAgent is what archway's requests to registries say they are
// when Access.UserAgent is empty.
const defaultUserAgent = "archway"

// defaultCertDirs are where containers/image looks for a registry's CA
// certificates when no CertDir is given.
var defaultCertDirs = []string{"/etc/containers/certs.d", "/etc/docker/certs.d"}

// Access says how to reach registries.
type Access struct {
	// AuthFile is a docker config file with the registries' credentials
	// (see FindAuthFile). The zero AuthFile means containers/image's default
	// places ($REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json,
	// ~/.docker/config.json, ...).
	AuthFile AuthFile
	// Credential, when set, is the only credential sent (possibly none, for
	// anonymous access): no file is read.
	Credential *types.DockerAuthConfig
	// InsecureRegistries are registries ("host" or "host:port", matched
	// exactly) reached over plain HTTP or TLS without verification;
	// AllRegistries makes every registry insecure. Loopback registries
	// always are.
	InsecureRegistries []string
	// CertDir holds per-registry CA certificates and client keys
	// (<CertDir>/<host:port>/*.crt); empty: containers/image's defaults.
	CertDir string
	// RegistriesConfPath is a registries.conf for mirrors and more insecure
	// registries; empty: containers/image's system default.
	RegistriesConfPath string
	// UserAgent is sent to registries; empty: "archway".
	UserAgent string
	// VerifyLoopback treats loopback registries like any other: insecure
	// only when InsecureRegistries (or a registries.conf) says so, as a
	// node's container runtime treats them. Placement sets it, so that it
	// sees registries as the nodes do.
	VerifyLoopback bool
}

// IsInsecure reports whether a registry ("host" or "host:port") is reached
// over plain HTTP or TLS without verification.
func (a Access) IsInsecure(host string) bool {
	if host == "" {
		return false
	}
	return slices.Contains(a.InsecureRegistries, AllRegistries) ||
		slices.Contains(a.InsecureRegistries, host) || (!a.VerifyLoopback && isLoopback(host))
}

// InsecureHosts returns the registries a registries.conf should mark
// insecure for an operation touching refs (image references): every host
// InsecureRegistries names, and the registries of refs that are insecure.
// Sorted, without duplicates and without AllRegistries.
func (a Access) InsecureHosts(refs ...string) []string {
	var hosts []string
	for _, h := range a.InsecureRegistries {
		if h != AllRegistries {
			hosts = append(hosts, h)
		}
	}
	for _, ref := range refs {
		if host := Host(ref); a.IsInsecure(host) {
			hosts = append(hosts, host)
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// SystemContext returns the containers/image settings for operations on
// the registry host ("host:port", as Host returns it): credentials, CA
// directory, user agent, and TLS checks off when host is insecure. An empty
// host leaves TLS checks on; a caller touching several registries at once
// marks the insecure ones in a registries.conf (see InsecureHosts).
func (a Access) SystemContext(host string) *types.SystemContext {
	sys := &types.SystemContext{
		DockerRegistryUserAgent:  a.UserAgent,
		DockerPerHostCertDirPath: a.CertDir,
		SystemRegistriesConfPath: a.RegistriesConfPath,
	}
	if sys.DockerRegistryUserAgent == "" {
		sys.DockerRegistryUserAgent = defaultUserAgent
	}
	switch {
	case a.Credential != nil:
		cred := *a.Credential
		sys.DockerAuthConfig = &cred
	case a.AuthFile.Legacy:
		sys.LegacyFormatAuthFilePath = a.AuthFile.Path
	default:
		sys.AuthFilePath = a.AuthFile.Path
	}
	if a.IsInsecure(host) {
		sys.DockerInsecureSkipTLSVerify = types.OptionalBoolTrue
	}
	return sys
}

// Transport returns an HTTP transport to host for a client of the registry
// API other than containers/image, with containers/image's rules: host's CA
// certificates and client keys from the CA directories, and, only when host
// is insecure (IsInsecure, or a registries.conf entry that says so), no TLS
// verification and plain HTTP allowed. Requests over plain HTTP to any other
// registry fail rather than send credentials in the clear.
func (a Access) Transport(host string) (http.RoundTripper, error) {
	insecure := a.IsInsecure(host)
	sys := &types.SystemContext{SystemRegistriesConfPath: a.RegistriesConfPath}
	if reg, err := sysregistriesv2.FindRegistry(sys, host); err == nil && reg != nil && reg.Insecure {
		insecure = true
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Only for registries the user marked insecure, as containers/image does.
		InsecureSkipVerify: insecure, //nolint:gosec // insecure registries are the user's explicit choice
	}
	dirs := defaultCertDirs
	if a.CertDir != "" {
		dirs = []string{a.CertDir}
	}
	for _, dir := range dirs {
		if err := tlsclientconfig.SetupCertificates(filepath.Join(dir, host), cfg); err != nil {
			return nil, fmt.Errorf("reading the certificates for %s: %w", host, err)
		}
	}
	t := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSClientConfig:     cfg,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	if insecure {
		return t, nil
	}
	return httpsOnly{t}, nil
}

// httpsOnly refuses requests over plain HTTP.
type httpsOnly struct{ next http.RoundTripper }

func (h httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" {
		return nil, fmt.Errorf("%s %s: plain HTTP is only for insecure registries, and %s is not one",
			req.Method, req.URL.Redacted(), req.URL.Host)
	}
	return h.next.RoundTrip(req)
}

// CredentialSource names where the credentials come from, for messages
// that say what to check when a registry refuses them.
func (a Access) CredentialSource() string {
	switch {
	case a.Credential != nil:
		return "the pull secrets"
	case a.AuthFile.Path != "":
		return a.AuthFile.Path
	default:
		return "the default credential files"
	}
}

// Host returns the registry of an image reference ("host" or "host:port",
// docker.io for Docker Hub), or "" when ref is not a reference.
func Host(ref string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ""
	}
	return reference.Domain(named)
}

// isLoopback reports whether a registry ("host" or "host:port") is on the
// loopback interface.
func isLoopback(registry string) bool {
	host := registry
	if h, _, err := net.SplitHostPort(registry); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
