// Package scm serves the SCM webhook triggers of BuildConfigs at
// OpenShift's path,
//
//	POST /apis/build.openshift.io/v1/namespaces/{ns}/buildconfigs/{name}/webhooks/{secret}/{type}
//
// with type github, gitlab, bitbucket or generic. A delivery starts a build
// (through package instantiate) when the secret matches one of the
// BuildConfig's triggers of that type and, for pushes, the pushed branch is
// the one the BuildConfig builds.
//
// Every input is untrusted. A wrong secret, an unknown BuildConfig and a
// BuildConfig without such a trigger get one identical answer, so the
// endpoint never tells whether a BuildConfig exists; secrets are compared in
// constant time; bodies are read up to a limit (413 beyond); malformed JSON,
// unknown events, commits that are not hashes and environment variables a
// trigger does not allow are refused with 400 saying why, and create
// nothing.
package scm

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
)

// The RBAC this code needs is written, each rule with its reason, in
// manifests/build-triggers/rbac/role.yaml
// (TestInstall in test/e2e/install shows each is needed).

// PathPrefix is the part of the webhook path before the namespace; a server
// routes everything under it to the Handler.
const PathPrefix = "/apis/build.openshift.io/v1/namespaces/"

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
	// Reader reads BuildConfigs and the Secrets their triggers name. A
	// live reader (the manager's API reader) keeps Secrets out of a cache.
	Reader client.Reader
	// Starter starts the builds.
	Starter *instantiate.Starter
	// Metrics counts requests (nil: not counted).
	Metrics *Metrics
	// MaxBodyBytes is the largest body read; default DefaultMaxBodyBytes.
	MaxBodyBytes int64

	mux *http.ServeMux
}

// NewHandler returns a Handler reading with r and starting with s.
func NewHandler(r client.Reader, s *instantiate.Starter, m *Metrics) *Handler {
	h := &Handler{Reader: r, Starter: s, Metrics: m, MaxBodyBytes: DefaultMaxBodyBytes}
	h.mux = http.NewServeMux()
	h.mux.HandleFunc(PathPrefix+"{ns}/buildconfigs/{name}/webhooks/{secret}/{type}", h.serve)
	return h
}

// ServeHTTP routes the webhook path; anything else is 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
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
	ns, name, secret := r.PathValue("ns"), r.PathValue("name"), r.PathValue("secret")
	bc, trigger, err := h.authorize(ctx, ns, name, secret, typ)
	if err != nil {
		if errors.Is(err, errNoMatch) {
			h.answer(w, metricType, "not_found", http.StatusNotFound, notFoundMessage, nil)
			return
		}
		log.FromContext(ctx).Error(err, "webhook: reading the BuildConfig or its secret", "namespace", ns, "buildConfig", name)
		h.answer(w, metricType, "error", http.StatusInternalServerError, "could not read the BuildConfig; try again", nil)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody()))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.answer(w, metricType, "too_large", http.StatusRequestEntityTooLarge,
				fmt.Sprintf("the body is larger than %d bytes", h.maxBody()), nil)
			return
		}
		h.answer(w, metricType, "bad_request", http.StatusBadRequest, "reading the body: "+err.Error(), nil)
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
	req, warning := request(typ, secret, trigger, ev)
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

// authorize finds the trigger of type typ whose secret is secret. Every
// miss is errNoMatch; other errors are the apiserver's.
func (h *Handler) authorize(ctx context.Context, ns, name, secret, typ string) (*buildv1.BuildConfig, *buildv1.WebHookTrigger, error) {
	want, ok := triggerTypes[typ]
	if !ok || secret == "" {
		return nil, nil, errNoMatch
	}
	bc := &buildv1.BuildConfig{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, bc); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) {
			return nil, nil, errNoMatch
		}
		return nil, nil, err
	}
	got := sha256.Sum256([]byte(secret))
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
		expected := sha256.Sum256([]byte(value))
		if subtle.ConstantTimeCompare(got[:], expected[:]) == 1 {
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
	s := &corev1.Secret{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: t.SecretReference.Name}, s); err != nil {
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
func request(typ, secret string, trigger *buildv1.WebHookTrigger, ev *event) (instantiate.Request, string) {
	var req instantiate.Request
	var rev *buildv1.SourceRevision
	if ev.revision != nil {
		rev = &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: ev.revision}
		req.Revision = rev
	}
	hidden := obfuscate(secret)
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
func obfuscate(string) string { return "<secret>" }
