package source

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// The URI schemes a Git source may use. file (and a plain path, which git
// reads as a local repository) only when the controller's configuration
// allows it: a local repository is read, and its upload-pack run, inside
// the builder, outside the build's chroot. ext and the other remote
// helpers (<transport>::<address>) run commands and are never allowed.
var (
	networkGitSchemes = []string{"http", "https", "ssh", "git", "git+ssh", "ssh+git"}
	// remoteHelper matches git's <transport>::<address> syntax.
	remoteHelper = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*::`)
	// urlScheme matches the scheme of a URL git reads as one.
	urlScheme = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)
)

// GitProtocols is what git may speak while fetching a source, as
// GIT_ALLOW_PROTOCOL says it (for the repository and every submodule):
// never ext, and file only when allowFile.
func GitProtocols(allowFile bool) string {
	protocols := "http:https:ssh:git"
	if allowFile {
		protocols += ":file"
	}
	return protocols
}

// CheckGitURI says why git must not be given uri, or nil. It refuses a URI
// that git would read as an option (a leading "-"), one with control
// characters, remote helpers (ext::, fd::, ...), schemes other than http,
// https, ssh and git, and local repositories (file:// or a path) unless
// allowFile.
func CheckGitURI(uri string, allowFile bool) error {
	switch {
	case uri == "":
		return fmt.Errorf("the git URI is empty: set spec.source.git.uri")
	case strings.HasPrefix(uri, "-"):
		return fmt.Errorf("the git URI %q starts with \"-\", which git would read as an option: use a URL (https://host/repo.git)", RedactURI(uri))
	case strings.ContainsFunc(uri, isControlOrSpace):
		return fmt.Errorf("the git URI %q holds spaces or control characters", RedactURI(uri))
	case remoteHelper.MatchString(uri):
		return fmt.Errorf("the git URI %q names a remote helper (<transport>::<address>), which runs commands: use an http(s), ssh or git URL", RedactURI(uri))
	}
	if m := urlScheme.FindStringSubmatch(uri); m != nil {
		scheme := strings.ToLower(m[1])
		for _, s := range networkGitSchemes {
			if scheme == s {
				return nil
			}
		}
		if scheme == "file" {
			if allowFile {
				return nil
			}
			return fmt.Errorf("the git URI %q names a local repository (file://), which this cluster does not allow: use an http(s), ssh or git URL", RedactURI(uri))
		}
		return fmt.Errorf("the git URI %q has the scheme %s: use http, https, ssh or git", RedactURI(uri), scheme)
	}
	if isSCPLike(uri) {
		return nil
	}
	if allowFile {
		return nil
	}
	return fmt.Errorf("the git URI %q is a local path, which this cluster does not allow: use an http(s), ssh or git URL", RedactURI(uri))
}

// isSCPLike reports whether git reads uri as ssh's [user@]host:path: a
// colon before any slash (git's rule; a path with a slash before its
// first colon is local).
func isSCPLike(uri string) bool {
	colon := strings.IndexByte(uri, ':')
	slash := strings.IndexByte(uri, '/')
	return colon > 0 && (slash < 0 || colon < slash)
}

// CheckGitRef says why ref must not be fetched or checked out, or nil: an
// empty ref (the default branch) is fine; a ref git would read as an option
// (a leading "-", as in --upload-pack=...) and the characters no branch,
// tag or commit name holds (git check-ref-format) are refused.
func CheckGitRef(ref string) error {
	switch {
	case ref == "":
		return nil
	case strings.HasPrefix(ref, "-"):
		return fmt.Errorf("the git ref %q starts with \"-\", which git would read as an option: name a branch, tag or commit", ref)
	case strings.ContainsFunc(ref, isControlOrSpace) || strings.ContainsAny(ref, "~^:?*[\\"):
		return fmt.Errorf("the git ref %q holds a character no branch, tag or commit name has (space, control, ~ ^ : ? * [ \\)", ref)
	case strings.Contains(ref, "..") || strings.Contains(ref, "@{") || strings.HasSuffix(ref, ".lock") ||
		strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".") || strings.Contains(ref, "//"):
		return fmt.Errorf("the git ref %q is not a valid branch, tag or commit name (git check-ref-format)", ref)
	}
	return nil
}

func isControlOrSpace(r rune) bool {
	return r <= ' ' || r == 0x7f
}

// redacted replaces credentials in what is shown.
const redacted = "redacted"

// RedactURI returns uri with the credentials of its user information
// replaced: the password of user:password, and the whole user information
// of an http(s) URL without a password (a token given as the user name). An
// ssh user name (git@host) is kept. What does not parse as a URL is
// returned as it is when it holds no "@" before its host, and with
// everything up to its last "@" replaced otherwise.
func RedactURI(uri string) string {
	m := urlScheme.FindStringSubmatch(uri)
	if m == nil {
		return uri
	}
	u, err := url.Parse(uri)
	if err != nil {
		rest := uri[len(m[0]):]
		host := rest
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			host = rest[:i]
		}
		if at := strings.LastIndexByte(host, '@'); at >= 0 {
			return m[0] + redacted + rest[at:]
		}
		return uri
	}
	if u.User == nil {
		return uri
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		u.User = url.UserPassword(u.User.Username(), redacted)
	} else if s := strings.ToLower(u.Scheme); s == "http" || s == "https" {
		u.User = url.User(redacted)
	} else {
		return uri
	}
	return u.String()
}

// uriCredentials splits the credentials off an http(s) URI: git gets the
// URI without them (so that they are neither in its command line, nor in
// the repository's .git/config, which is part of the build context, nor in
// its messages) and the credentials through GIT_ASKPASS.
func uriCredentials(uri string) (clean, user, password string, ok bool) {
	m := urlScheme.FindStringSubmatch(uri)
	if m == nil {
		return uri, "", "", false
	}
	if s := strings.ToLower(m[1]); s != "http" && s != "https" {
		return uri, "", "", false
	}
	u, err := url.Parse(uri)
	if err != nil || u.User == nil {
		return uri, "", "", false
	}
	user = u.User.Username()
	password, _ = u.User.Password()
	u.User = nil
	return u.String(), user, password, true
}

// redact replaces every occurrence of the credentials of uri in text.
func redact(uri, text string) string {
	if uri == "" {
		return text
	}
	text = strings.ReplaceAll(text, uri, RedactURI(uri))
	if _, user, password, ok := uriCredentials(uri); ok {
		secret := password
		if secret == "" {
			secret = user // a token given as the user name
		}
		for _, s := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret)} {
			if len(s) >= 4 {
				text = strings.ReplaceAll(text, s, redacted)
			}
		}
	}
	return text
}
