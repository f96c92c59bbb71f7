package scm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"regexp"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// event is what a delivery asks for once parsed: a push of ref with a
// commit, or nothing to build (noBuild says why).
type event struct {
	// ref is the pushed ref ("refs/heads/main", or "main"); empty when the
	// delivery names none (a generic call without git).
	ref string
	// revision is the pushed commit; nil when the delivery names none.
	revision *buildv1.GitSourceRevision
	// noBuild, when set, says why the delivery starts no build (a ping, a
	// deleted branch) and is answered 200.
	noBuild string
	// The generic webhook's extras.
	env                    []corev1.EnvVar
	platforms              []string
	platformsAllowedToFail []string
}

// badRequest is a delivery the endpoint refuses with 400 and this message.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func badRequestf(format string, args ...any) error {
	return &badRequest{fmt.Sprintf(format, args...)}
}

// Limits on what a delivery puts into a Build, so that no payload makes a
// Build too large to store, or a field the builder would misread.
const (
	maxMessage = 4096
	maxName    = 256
	maxEnv     = 64
	maxEnvSize = 32 * 1024
)

// commitPattern is a Git object name (SHA-1 or SHA-256, abbreviated to at
// least 7). Anything else is refused: the builder checks the commit out, and
// a value such as "--upload-pack=..." must never reach git.
var commitPattern = regexp.MustCompile(`^[0-9a-fA-F]{7,64}$`)

// envNamePattern is a portable environment variable name.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// decodeJSON decodes a JSON object into v; an empty body is refused.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequestf("empty body: a JSON payload is required")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return badRequestf("malformed JSON: %s", jsonError(err))
	}
	if dec.More() {
		return badRequestf("malformed JSON: data after the payload's object")
	}
	return nil
}

// jsonError says what is wrong with a payload without quoting it.
func jsonError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("%s (at byte %d)", syn.Error(), syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q: expected %s, got a JSON %s", typ.Field, typ.Type, typ.Value)
	default:
		return err.Error()
	}
}

// revision checks and trims what a payload says of a commit.
func revision(commit, message string, author, committer buildv1.SourceControlUser) (*buildv1.GitSourceRevision, error) {
	if !commitPattern.MatchString(commit) {
		return nil, badRequestf("commit %q is not a Git commit hash (7 to 64 hexadecimal digits)", truncate(commit, 80))
	}
	return &buildv1.GitSourceRevision{
		Commit:    strings.ToLower(commit),
		Message:   truncate(message, maxMessage),
		Author:    user(author),
		Committer: user(committer),
	}, nil
}

func user(u buildv1.SourceControlUser) buildv1.SourceControlUser {
	return buildv1.SourceControlUser{Name: truncate(u.Name, maxName), Email: truncate(u.Email, maxName)}
}

// truncate cuts s to at most n bytes on a rune boundary and drops invalid
// UTF-8.
func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ---- GitHub ----

type githubUser struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

type githubCommit struct {
	ID        string     `json:"id"`
	Message   string     `json:"message"`
	Author    githubUser `json:"author"`
	Committer githubUser `json:"committer"`
}

type githubPush struct {
	Ref        string        `json:"ref"`
	After      string        `json:"after"`
	Deleted    bool          `json:"deleted"`
	HeadCommit *githubCommit `json:"head_commit"`
}

// parseGitHub reads a GitHub delivery: X-GitHub-Event push (a build) or
// ping (none).
func parseGitHub(h http.Header, body []byte) (*event, error) {
	switch kind := h.Get("X-GitHub-Event"); kind {
	case "ping":
		return &event{noBuild: "ping received; no build started"}, nil
	case "push":
	case "":
		return nil, badRequestf("missing X-GitHub-Event header: GitHub sends push and ping events")
	default:
		return nil, badRequestf("unsupported GitHub event %q: only push starts builds (and ping is answered)", truncate(kind, 64))
	}
	var p githubPush
	if err := decodeJSON(body, &p); err != nil {
		return nil, err
	}
	if p.Ref == "" {
		return nil, badRequestf("push event without ref")
	}
	if p.Deleted || p.HeadCommit == nil {
		return &event{ref: p.Ref, noBuild: "the push deleted " + truncate(p.Ref, 256) + "; no build started"}, nil
	}
	c := p.HeadCommit
	rev, err := revision(c.ID, c.Message,
		buildv1.SourceControlUser{Name: c.Author.Name, Email: c.Author.Email},
		buildv1.SourceControlUser{Name: c.Committer.Name, Email: c.Committer.Email})
	if err != nil {
		return nil, err
	}
	return &event{ref: p.Ref, revision: rev}, nil
}

// ---- GitLab ----

type gitlabCommit struct {
	ID      string `json:"id"`
	Message string `json:"message"`
	Author  struct {
		Name  string `json:"name"`
		Email string `json:"email"`
	} `json:"author"`
}

type gitlabPush struct {
	ObjectKind  string         `json:"object_kind"`
	Ref         string         `json:"ref"`
	CheckoutSHA *string        `json:"checkout_sha"`
	After       string         `json:"after"`
	Commits     []gitlabCommit `json:"commits"`
}

// parseGitLab reads a GitLab delivery: X-Gitlab-Event "Push Hook".
func parseGitLab(h http.Header, body []byte) (*event, error) {
	switch kind := h.Get("X-Gitlab-Event"); kind {
	case "Push Hook":
	case "":
		return nil, badRequestf("missing X-Gitlab-Event header: GitLab sends \"Push Hook\" for pushes")
	default:
		return nil, badRequestf("unsupported GitLab event %q: only \"Push Hook\" starts builds", truncate(kind, 64))
	}
	var p gitlabPush
	if err := decodeJSON(body, &p); err != nil {
		return nil, err
	}
	if p.ObjectKind != "" && p.ObjectKind != "push" {
		return nil, badRequestf("unsupported GitLab object_kind %q in a Push Hook: want push", truncate(p.ObjectKind, 64))
	}
	if p.Ref == "" {
		return nil, badRequestf("push event without ref")
	}
	if p.CheckoutSHA == nil || *p.CheckoutSHA == "" || strings.Trim(p.After, "0") == "" && p.After != "" {
		return &event{ref: p.Ref, noBuild: "the push deleted " + truncate(p.Ref, 256) + "; no build started"}, nil
	}
	sha := *p.CheckoutSHA
	var c gitlabCommit
	c.ID = sha
	for _, x := range p.Commits {
		if x.ID == sha {
			c = x
		}
	}
	u := buildv1.SourceControlUser{Name: c.Author.Name, Email: c.Author.Email}
	rev, err := revision(sha, c.Message, u, u)
	if err != nil {
		return nil, err
	}
	return &event{ref: p.Ref, revision: rev}, nil
}

// ---- Bitbucket ----

type bitbucketTarget struct {
	Hash    string `json:"hash"`
	Message string `json:"message"`
	Author  struct {
		Raw  string `json:"raw"`
		User *struct {
			DisplayName string `json:"display_name"`
		} `json:"user"`
	} `json:"author"`
}

type bitbucketRef struct {
	Type   string          `json:"type"`
	Name   string          `json:"name"`
	Target bitbucketTarget `json:"target"`
}

type bitbucketPush struct {
	Push struct {
		Changes []struct {
			New *bitbucketRef `json:"new"`
			Old *bitbucketRef `json:"old"`
		} `json:"changes"`
	} `json:"push"`
}

// parseBitbucket reads a Bitbucket Cloud delivery: X-Event-Key repo:push.
// A push may change several refs: the one of the BuildConfig's branch is
// chosen (wantBranch), else the last branch change.
func parseBitbucket(h http.Header, body []byte, wantBranch string) (*event, error) {
	switch kind := h.Get("X-Event-Key"); kind {
	case "repo:push":
	case "":
		return nil, badRequestf("missing X-Event-Key header: Bitbucket sends repo:push for pushes")
	default:
		return nil, badRequestf("unsupported Bitbucket event %q: only repo:push starts builds", truncate(kind, 64))
	}
	var p bitbucketPush
	if err := decodeJSON(body, &p); err != nil {
		return nil, err
	}
	if len(p.Push.Changes) == 0 {
		return nil, badRequestf("repo:push event without push.changes")
	}
	var chosen *bitbucketRef
	var deleted string
	for _, c := range p.Push.Changes {
		if c.New == nil {
			if c.Old != nil && c.Old.Name == wantBranch {
				deleted = c.Old.Name
			}
			continue
		}
		if c.New.Type != "branch" {
			continue
		}
		if chosen == nil || c.New.Name == wantBranch {
			chosen = c.New
		}
	}
	if chosen == nil {
		if deleted != "" {
			return &event{ref: deleted, noBuild: "the push deleted " + truncate(deleted, 256) + "; no build started"}, nil
		}
		return &event{noBuild: "the push changed no branch; no build started"}, nil
	}
	t := chosen.Target
	author := parseRawAuthor(t.Author.Raw)
	if author.Name == "" && t.Author.User != nil {
		author.Name = t.Author.User.DisplayName
	}
	rev, err := revision(t.Hash, t.Message, author, author)
	if err != nil {
		return nil, err
	}
	return &event{ref: chosen.Name, revision: rev}, nil
}

// parseRawAuthor splits Git's "Name <email>".
func parseRawAuthor(raw string) buildv1.SourceControlUser {
	if a, err := mail.ParseAddress(raw); err == nil {
		return buildv1.SourceControlUser{Name: a.Name, Email: a.Address}
	}
	return buildv1.SourceControlUser{Name: raw}
}

// ---- Generic ----

type genericUser struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// genericPayload is OpenShift's GenericWebHookEvent plus archway's platform
// lists.
type genericPayload struct {
	Type string `json:"type"`
	Git  *struct {
		URI       string      `json:"uri"`
		Ref       string      `json:"ref"`
		Commit    string      `json:"commit"`
		Author    genericUser `json:"author"`
		Committer genericUser `json:"committer"`
		Message   string      `json:"message"`
	} `json:"git"`
	Env                    []corev1.EnvVar `json:"env"`
	Platforms              []string        `json:"platforms"`
	PlatformsAllowedToFail []string        `json:"platformsAllowedToFail"`
}

// parseGeneric reads a generic delivery: no body, or a JSON object (content
// type application/json).
func parseGeneric(h http.Header, body []byte) (*event, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return &event{}, nil
	}
	var p genericPayload
	if err := decodeJSON(body, &p); err != nil {
		return nil, err
	}
	ev := &event{platforms: p.Platforms, platformsAllowedToFail: p.PlatformsAllowedToFail}
	if p.Git != nil {
		ev.ref = p.Git.Ref
		if p.Git.Commit != "" {
			rev, err := revision(p.Git.Commit, p.Git.Message,
				buildv1.SourceControlUser{Name: p.Git.Author.Name, Email: p.Git.Author.Email},
				buildv1.SourceControlUser{Name: p.Git.Committer.Name, Email: p.Git.Committer.Email})
			if err != nil {
				return nil, err
			}
			ev.revision = rev
		}
	}
	if len(p.Env) > maxEnv {
		return nil, badRequestf("env has %d variables; at most %d", len(p.Env), maxEnv)
	}
	size := 0
	for _, e := range p.Env {
		if !envNamePattern.MatchString(e.Name) {
			return nil, badRequestf("env: %q is not a valid variable name (letters, digits and _, not starting with a digit)", truncate(e.Name, 64))
		}
		if e.ValueFrom != nil {
			return nil, badRequestf("env %s: valueFrom is not allowed from a webhook; give a value", e.Name)
		}
		size += len(e.Name) + len(e.Value)
		ev.env = append(ev.env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	if size > maxEnvSize {
		return nil, badRequestf("env is %d bytes; at most %d", size, maxEnvSize)
	}
	if len(p.Platforms) > buildv1.MaxPlatforms || len(p.PlatformsAllowedToFail) > buildv1.MaxPlatforms {
		return nil, badRequestf("at most %d platforms", buildv1.MaxPlatforms)
	}
	return ev, nil
}
