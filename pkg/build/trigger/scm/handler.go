// Package scm serves the SCM webhook triggers of BuildConfigs at
// OpenShift's path,
//
//	POST /apis/build.openshift.io/v1/namespaces/{ns}/buildconfigs/{name}/webhooks/{secret}/{type}
//
// and, through the kube-apiserver, at the same path of the aggregated API
// triggers.archway.dev/v1alpha1 (ServeDelivery; package aggregated), with
// type github, gitlab, bitbucket or generic. A delivery starts a build
// (through package instantiate) when the secret matches one of the
// BuildConfig's triggers of that type and, for pushes, the pushed branch is
// the one the BuildConfig builds.
//
// A delivery proves it may start the trigger's builds with the secret in
// the URL (as in OpenShift) or, preferred, as its provider signs: GitHub's
// X-Hub-Signature-256 (an HMAC-SHA256 of the body keyed with the trigger's
// secret) and GitLab's X-Gitlab-Token (the secret itself, in a header).
// When a delivery carries the signature it decides, and the URL's secret
// segment is not read: the secret then never needs to be in a URL, where
// proxies and delivery logs show it.
//
// Every input is untrusted. A wrong secret or signature, an unknown
// BuildConfig and a BuildConfig without such a trigger get one identical
// answer, so the endpoint never tells whether a BuildConfig exists; they
// cost the same too (BuildConfigs and Secrets are read from informer
// caches, and a miss does the reads and the comparison a hit does);
// secrets are compared in constant time; a client address failing more
// than the limit is answered 429 before anything is read; bodies are read
// up to a limit (413 beyond); malformed JSON, unknown events, commits that
// are not hashes and environment variables a trigger does not allow are
// refused with 400 saying why, and create nothing.
package scm

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/trigger/paths"
)

// The RBAC this code needs is written, each rule with its reason, in
// manifests/build-triggers/rbac/role.yaml
// (TestInstall in test/e2e/install shows each is needed).

// PathPrefix is the part of the webhook path before the namespace; a server
// routes everything under it to the Handler.
const PathPrefix = paths.OpenShiftPrefix + "/namespaces/"

// DefaultMaxBodyBytes is the largest body read (GitHub's own limit is 25
// MB, but a push payload carries at most 20 commits: 5 MiB is plenty).
const DefaultMaxBodyBytes = 5 << 20

// The webhook types of the path, and their triggers.
var triggerTypes = map[string]buildv1.BuildTriggerType{
	"github":    buildv1.GitHubWebHookBuildTriggerType,
	"gitlab":    buildv1.GitLabWebHookBuildTriggerType,
	"bitbucket": buildv1.BitbucketWebHookBuildTriggerType,
	"generic":   buildv1.GenericWebHookBuildTriggerType,
}

// notFoundMessage is the one answer to a wrong secret, an unknown
// BuildConfig, an unknown type and a BuildConfig without such a trigger.
const notFoundMessage = "no webhook trigger matches this URL"

// Handler serves the webhooks.
type Handler struct {
	// Reader reads BuildConfigs, and the Secrets their triggers name when
	// Secrets is nil. An informer cache makes an unknown BuildConfig cost
	// what a known one does, and a flood cost the apiserver nothing.
	Reader client.Reader
	// Secrets, when set, reads the Secrets triggers name (a cache of
	// Secrets trimmed to their WebHookSecretKey, see TrimSecret).
	Secrets client.Reader
	// Starter starts the builds.
	Starter *instantiate.Starter
	// Metrics counts requests (nil: not counted).
	Metrics *Metrics
	// MaxBodyBytes is the largest body read; default DefaultMaxBodyBytes.
	MaxBodyBytes int64

	mux      *http.ServeMux
	failures *failureLimiter
}

// NewHandler returns a Handler reading with r and starting with s,
// limiting the failed requests of a client address to
// DefaultFailureBurst, then one every DefaultFailureInterval.
func NewHandler(r client.Reader, s *instantiate.Starter, m *Metrics) *Handler {
	return NewHandlerWithFailureLimit(r, s, m, DefaultFailureBurst, DefaultFailureInterval)
}

// NewHandlerWithFailureLimit is NewHandler with the failure limit given.
func NewHandlerWithFailureLimit(r client.Reader, s *instantiate.Starter, m *Metrics, burst int, interval time.Duration) *Handler {
	h := &Handler{Reader: r, Starter: s, Metrics: m, MaxBodyBytes: DefaultMaxBodyBytes, failures: newFailureLimiter(burst, interval)}
	h.mux = http.NewServeMux()
	h.mux.HandleFunc(paths.WebhookPattern(paths.OpenShiftPrefix), h.serve)
	return h
}

// ServeHTTP routes the webhook path; anything else is 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// ServeDelivery serves a delivery another server's mux routed here, with
// the path values ns, name, secret and type (paths.WebhookPattern): the
// aggregated API's path.
func (h *Handler) ServeDelivery(w http.ResponseWriter, r *http.Request) {
	h.serve(w, r)
}

// response is the JSON body of every answer.
type response struct {
	Status    string `json:"status"`
	Message   string `json:"message"`
	Build     string `json:"build,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

func (h *Handler) answer(w http.ResponseWriter, typ, result string, code int, msg string, b *buildv1.Build) {
	h.Metrics.request(typ, result)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	resp := response{Status: result, Message: msg}
	if b != nil {
		resp.Build, resp.Namespace = b.Name, b.Namespace
	}
	_ = json.NewEncoder(w).Encode(resp)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	typ := r.PathValue("type")
	metricType := typ
	if _, ok := triggerTypes[typ]; !ok {
		metricType = "unknown"
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.answer(w, metricType, "method_not_allowed", http.StatusMethodNotAllowed, "use POST", nil)
		return
	}
	addr := clientAddress(r)
	if limited, retry := h.failures.limited(addr); limited {
		w.Header().Set("Retry-After", strconv.Itoa(int(retry/time.Second)+1))
		h.answer(w, metricType, "rate_limited", http.StatusTooManyRequests,
			"too many failed requests from this address; retry later", nil)
		return
	}
	ns, name := r.PathValue("ns"), r.PathValue("name")
	var body []byte
	readBody := func() bool {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody()))
		if err == nil {
			return true
		}
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.answer(w, metricType, "too_large", http.StatusRequestEntityTooLarge,
				fmt.Sprintf("the body is larger than %d bytes", h.maxBody()), nil)
			return false
		}
		h.answer(w, metricType, "bad_request", http.StatusBadRequest, "reading the body: "+err.Error(), nil)
		return false
	}
	// A signature covers the body: read it first. Without one the URL's
	// secret is checked before the body is read.
	signed := signatureOf(typ, r.Header) != nil
	if signed && !readBody() {
		return
	}
	cred := credentialOf(typ, r.Header, r.PathValue("secret"), body)
	bc, trigger, err := h.authorize(ctx, ns, name, typ, cred)
	if err != nil {
		if errors.Is(err, errNoMatch) {
			h.failures.failed(addr)
			result := "not_found"
			if cred.signed {
				// Told apart in the metrics only: the answer is the same.
				result = "bad_signature"
			}
			h.answer(w, metricType, result, http.StatusNotFound, notFoundMessage, nil)
			return
		}
		log.FromContext(ctx).Error(err, "webhook: reading the BuildConfig or its secret", "namespace", ns, "buildConfig", name)
		h.answer(w, metricType, "error", http.StatusInternalServerError, "could not read the BuildConfig; try again", nil)
		return
	}
	if !signed && !readBody() {
		return
	}
	if len(strings.TrimSpace(string(body))) > 0 && !isJSON(r.Header.Get("Content-Type")) {
		h.answer(w, metricType, "unsupported_media_type", http.StatusUnsupportedMediaType,
			"send the payload as application/json", nil)
		return
	}
	ev, err := parse(typ, r.Header, body, gitRef(bc))
	if err != nil {
		var bad *badRequest
		if errors.As(err, &bad) {
			h.answer(w, metricType, "bad_request", http.StatusBadRequest, bad.msg, nil)
			return
		}
		h.answer(w, metricType, "error", http.StatusInternalServerError, err.Error(), nil)
		return
	}
	if ev.noBuild != "" {
		h.answer(w, metricType, "skipped", http.StatusOK, ev.noBuild, nil)
		return
	}
	if typ != "generic" && bc.Spec.Source.Git == nil {
		h.answer(w, metricType, "bad_request", http.StatusBadRequest,
			"the BuildConfig has no Git source: a push event cannot start it (use the generic webhook)", nil)
		return
	}
	if ev.ref != "" && bc.Spec.Source.Git != nil && !RefMatches(ev.ref, bc.Spec.Source.Git.Ref) {
		h.answer(w, metricType, "skipped", http.StatusOK, fmt.Sprintf(
			"the push is to %s and the BuildConfig builds %s; no build started", truncate(ev.ref, 256), gitRef(bc)), nil)
		return
	}
	req, warning := request(typ, trigger, ev)
	b, err := h.Starter.Start(ctx, ns, name, req)
	switch {
	case err == nil:
		msg := "build " + b.Name + " started"
		if warning != "" {
			msg += "; " + warning
		}
		h.answer(w, metricType, "started", http.StatusOK, msg, b)
	case errors.Is(err, instantiate.ErrPaused):
		h.answer(w, metricType, "paused", http.StatusConflict, err.Error(), nil)
	case apierrors.IsInvalid(err):
		h.answer(w, metricType, "invalid", http.StatusUnprocessableEntity, instantiate.InvalidMessage(err), nil)
	case apierrors.IsNotFound(err):
		h.answer(w, metricType, "not_found", http.StatusNotFound, notFoundMessage, nil)
	default:
		log.FromContext(ctx).Error(err, "webhook: starting a build", "namespace", ns, "buildConfig", name)
		h.answer(w, metricType, "error", http.StatusInternalServerError, "could not start the build; try again", nil)
	}
}

func (h *Handler) maxBody() int64 {
	if h.MaxBodyBytes > 0 {
		return h.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

func parse(typ string, hdr http.Header, body []byte, branch string) (*event, error) {
	switch typ {
	case "github":
		return parseGitHub(hdr, body)
	case "gitlab":
		return parseGitLab(hdr, body)
	case "bitbucket":
		return parseBitbucket(hdr, body, branch)
	default:
		return parseGeneric(hdr, body)
	}
}

// errNoMatch is every reason a URL names no trigger.
var errNoMatch = errors.New(notFoundMessage)

// credential is what a delivery proves its right with: match says whether
// a trigger's secret is the one it was made with.
type credential struct {
	// signed: the provider's signature (or token header), not the URL.
	signed bool
	match  func(secret string) bool
}

// signatureOf is the signature header of a delivery of type typ, nil when
// it has none: GitHub's X-Hub-Signature-256, GitLab's X-Gitlab-Token.
func signatureOf(typ string, hdr http.Header) []string {
	switch typ {
	case "github":
		return hdr.Values("X-Hub-Signature-256")
	case "gitlab":
		return hdr.Values("X-Gitlab-Token")
	}
	return nil
}

// credentialOf is the delivery's credential: its signature when it has
// one, else the URL's secret. Every comparison takes the same time
// whatever the values.
func credentialOf(typ string, hdr http.Header, urlSecret string, body []byte) credential {
	sig := signatureOf(typ, hdr)
	if sig == nil {
		got := sha256.Sum256([]byte(urlSecret))
		return credential{match: func(secret string) bool {
			want := sha256.Sum256([]byte(secret))
			return urlSecret != "" && subtle.ConstantTimeCompare(got[:], want[:]) == 1
		}}
	}
	if len(sig) != 1 {
		return credential{signed: true, match: func(string) bool { return false }}
	}
	if typ == "gitlab" {
		got := sha256.Sum256([]byte(sig[0]))
		return credential{signed: true, match: func(secret string) bool {
			want := sha256.Sum256([]byte(secret))
			return subtle.ConstantTimeCompare(got[:], want[:]) == 1
		}}
	}
	// GitHub: "sha256=" and the hex HMAC-SHA256 of the body.
	got, err := hex.DecodeString(strings.TrimPrefix(sig[0], "sha256="))
	if err != nil || !strings.HasPrefix(sig[0], "sha256=") {
		got = nil
	}
	return credential{signed: true, match: func(secret string) bool {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		return hmac.Equal(mac.Sum(nil), got) && got != nil
	}}
}

// missName is the Secret an unknown BuildConfig's miss reads, as a hit
// reads its trigger's: a name no Secret can have (an upper-case letter).
const missName = "NoSecret"

// authorize finds the trigger of type typ whose secret cred was made
// with. Every miss is errNoMatch, after the reads and the comparison a
// hit makes; other errors are the apiserver's.
func (h *Handler) authorize(ctx context.Context, ns, name, typ string, cred credential) (*buildv1.BuildConfig, *buildv1.WebHookTrigger, error) {
	want, ok := triggerTypes[typ]
	if !ok {
		return nil, nil, errNoMatch
	}
	bc := &buildv1.BuildConfig{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, bc); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) {
			_, _ = h.secretOf(ctx, ns, &buildv1.WebHookTrigger{SecretReference: &buildv1.SecretLocalReference{Name: missName}})
			cred.match(missName)
			return nil, nil, errNoMatch
		}
		return nil, nil, err
	}
	for i := range bc.Spec.Triggers {
		t := webHook(&bc.Spec.Triggers[i], want)
		if t == nil {
			continue
		}
		value, err := h.secretOf(ctx, ns, t)
		if err != nil {
			return nil, nil, err
		}
		if value == "" {
			continue
		}
		if cred.match(value) {
			return bc, t, nil
		}
	}
	return nil, nil, errNoMatch
}

// secretOf is a trigger's secret: the Secret's WebHookSecretKey when the
// trigger names one (empty when it does not exist), else the deprecated
// inline secret.
func (h *Handler) secretOf(ctx context.Context, ns string, t *buildv1.WebHookTrigger) (string, error) {
	if t.SecretReference == nil {
		return t.Secret, nil
	}
	reader := h.Secrets
	if reader == nil {
		reader = h.Reader
	}
	s := &corev1.Secret{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.SecretReference.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading secret %s: %w", t.SecretReference.Name, err)
	}
	return string(s.Data[buildv1.WebHookSecretKey]), nil
}

func webHook(t *buildv1.BuildTriggerPolicy, typ buildv1.BuildTriggerType) *buildv1.WebHookTrigger {
	if t.Type != typ {
		return nil
	}
	switch typ {
	case buildv1.GitHubWebHookBuildTriggerType:
		return t.GitHubWebHook
	case buildv1.GitLabWebHookBuildTriggerType:
		return t.GitLabWebHook
	case buildv1.BitbucketWebHookBuildTriggerType:
		return t.BitbucketWebHook
	case buildv1.GenericWebHookBuildTriggerType:
		return t.GenericWebHook
	}
	return nil
}

// defaultGitRef is the branch a BuildConfig without source.git.ref builds,
// as in OpenShift.
const defaultGitRef = "master"

func gitRef(bc *buildv1.BuildConfig) string {
	if bc.Spec.Source.Git == nil || bc.Spec.Source.Git.Ref == "" {
		return defaultGitRef
	}
	return bc.Spec.Source.Git.Ref
}

// RefMatches says whether a pushed ref ("refs/heads/main" or "main") is the
// BuildConfig's ref (empty: master, as in OpenShift).
func RefMatches(pushed, configured string) bool {
	if configured == "" {
		configured = defaultGitRef
	}
	return strings.TrimPrefix(pushed, "refs/heads/") == strings.TrimPrefix(configured, "refs/heads/")
}

// request is the start request of a delivery, and a warning for the
// caller when part of it was ignored.
func request(typ string, trigger *buildv1.WebHookTrigger, ev *event) (instantiate.Request, string) {
	var req instantiate.Request
	var rev *buildv1.SourceRevision
	if ev.revision != nil {
		rev = &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: ev.revision}
		req.Revision = rev
	}
	hidden := obfuscate()
	cause := buildv1.BuildTriggerCause{}
	switch typ {
	case "github":
		cause.Message = instantiate.CauseGitHub
		cause.GitHubWebHook = &buildv1.GitHubWebHookCause{Revision: rev, Secret: hidden}
	case "gitlab":
		cause.Message = instantiate.CauseGitLab
		cause.GitLabWebHook = &buildv1.GitLabWebHookCause{CommonWebHookCause: buildv1.CommonWebHookCause{Revision: rev, Secret: hidden}}
	case "bitbucket":
		cause.Message = instantiate.CauseBitbucket
		cause.BitbucketWebHook = &buildv1.BitbucketWebHookCause{CommonWebHookCause: buildv1.CommonWebHookCause{Revision: rev, Secret: hidden}}
	default:
		cause.Message = instantiate.CauseGeneric
		cause.GenericWebHook = &buildv1.GenericWebHookCause{Revision: rev, Secret: hidden}
	}
	req.TriggeredBy = []buildv1.BuildTriggerCause{cause}
	req.Platforms, req.PlatformsAllowedToFail = ev.platforms, ev.platformsAllowedToFail
	var warning string
	if len(ev.env) > 0 {
		if trigger.AllowEnv {
			req.Env = ev.env
		} else {
			warning = "env ignored: the trigger does not set allowEnv"
		}
	}
	return req, warning
}

// obfuscate hides a secret in triggeredBy: Builds are read by more people
// than the Secret, so neither the secret nor its length is recorded.
func obfuscate() string { return "<secret>" }

// TrimSecret keeps of a Secret only what a trigger reads, its name and
// WebHookSecretKey: a transform for the informer cache of Secrets, so the
// cache holds no other secret.
func TrimSecret(obj any) (any, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	trimmed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace,
		UID: s.UID, ResourceVersion: s.ResourceVersion}}
	if v, ok := s.Data[buildv1.WebHookSecretKey]; ok {
		trimmed.Data = map[string][]byte{buildv1.WebHookSecretKey: v}
	}
	return trimmed, nil
}
