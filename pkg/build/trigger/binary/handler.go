// Package binary serves build-controller's binary-build endpoint (Handler):
// kubectl archway start-build --from-dir, --from-file and --from-archive
// upload there; the upload is stored as an artifact (package artifact) in
// the output repository and the Build is started naming it.
package binary

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"

	"go.podman.io/image/v5/types"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/endpoints/request"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/trigger/binary/artifact"
	"github.com/archway-build/archway/pkg/build/trigger/paths"
	"github.com/archway-build/archway/pkg/placement/image"
	"github.com/archway-build/archway/pkg/registry"
)

// The RBAC this code needs is written, each rule with its reason, in
// manifests/build-triggers/rbac/role.yaml
// (TestInstall in test/e2e/install shows each is needed).

// Pattern is the path of the binary-build endpoint, OpenShift's subresource
// of a BuildConfig, as an http.ServeMux pattern.
var Pattern = paths.BinaryPattern(paths.OpenShiftPrefix)

// Subresource is the subresource a user needs the verb create on (in the
// BuildConfig's namespace) to start a binary build, as in OpenShift.
const Subresource = paths.InstantiateBinary

// DefaultMaxBytes is the largest upload: the builder's limit on a binary
// input (source.DefaultArchiveLimits).
const DefaultMaxBytes = 2 << 30

// Handler is the binary-build endpoint:
//
//	POST /apis/build.openshift.io/v1/namespaces/{ns}/buildconfigs/{name}/instantiatebinary
//
// with the archive (or, with ?asFile=NAME, the file) as the body and the
// caller's Kubernetes bearer token. The query takes OpenShift's
// BinaryBuildRequestOptions (asFile, revision.commit, revision.message,
// revision.authorName, revision.authorEmail, revision.committerName,
// revision.committerEmail) and archway's platforms, platformsAllowedToFail
// (comma-separated), env and buildArg (NAME=VALUE, repeated) and noCache
// (true or false).
//
// The caller is authenticated by a TokenReview and authorized by a
// SubjectAccessReview for create on buildconfigs/instantiatebinary in the
// namespace before anything is read (with Delegated, the aggregated API's
// filters did both), and for create on builds/<strategy>
// (the BuildConfig's) once it is read; the request is checked (the
// BuildConfig's source is Binary, it has an output, the Build it makes
// passes a dry-run create) before anything is stored; the body is streamed
// into the output repository with the push secret, bounded by MaxBytes
// (413 beyond, and nothing is tagged or created); then the Build is started
// through package instantiate. The answer is the Build (201), or a Status
// saying what to fix.
type Handler struct {
	// Client creates TokenReviews, SubjectAccessReviews and dry-run Builds.
	Client client.Client
	// Reader reads BuildConfigs and push secrets live (never a cache of
	// Secrets).
	Reader client.Reader
	// Starter starts the builds.
	Starter *instantiate.Starter
	// Access says how to reach registries (insecure ones, user agent); the
	// credentials are the push secret's.
	Access registry.Access
	// MaxBytes bounds the upload; default DefaultMaxBytes.
	MaxBytes int64
	// Delegated serves the aggregated API's path: the kube-apiserver
	// authenticated the user, and build-triggers' filters verified the
	// apiserver's front-proxy certificate and authorized the user for
	// create on buildconfigs/instantiatebinary (package aggregated); the
	// user is the request context's. Without it, the request carries the
	// user's bearer token and both checks are made here.
	Delegated bool
}

// status is the JSON answer of a failure, a Kubernetes Status.
type status struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Status     string `json:"status"`
	Message    string `json:"message"`
	Reason     string `json:"reason,omitempty"`
	Code       int    `json:"code"`
}

func fail(w http.ResponseWriter, code int, reason, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(status{Kind: "Status", APIVersion: "v1", Status: "Failure",
		Message: fmt.Sprintf(format, args...), Reason: reason, Code: code})
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "use POST")
		return
	}
	ns, name := r.PathValue("ns"), r.PathValue("name")
	user, ok := h.user(ctx, w, r, ns, name)
	if !ok {
		return
	}
	req, err := requestOf(r)
	if err != nil {
		fail(w, http.StatusBadRequest, "BadRequest", "%v", err)
		return
	}
	bc := &buildv1.BuildConfig{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, bc); err != nil {
		h.startFailed(ctx, w, ns, name, err)
		return
	}
	if t := sourceType(bc); t != buildv1.BuildSourceBinary {
		fail(w, http.StatusBadRequest, "BadRequest",
			"buildconfig %q has source type %s: binary builds need source type Binary (spec.source.binary)", name, t)
		return
	}
	// As OpenShift's BuildByStrategy admission does for instantiatebinary:
	// the user starting the build needs its strategy (the Build is created
	// by build-controller, whose own right the strategy policy checks).
	strategy := string(bc.Spec.Strategy.Type)
	if strategy == "" {
		strategy = string(buildv1.DockerBuildStrategyType)
	}
	allowed, err := h.authorize(ctx, user, ns, "builds", strings.ToLower(strategy), "")
	if err != nil {
		log.FromContext(ctx).Error(err, "binary build: SubjectAccessReview", "namespace", ns, "buildConfig", name)
		fail(w, http.StatusInternalServerError, "InternalError", "could not authorize the request; try again")
		return
	}
	if !allowed {
		fail(w, http.StatusForbidden, "Forbidden", "build strategy %s is not allowed", strategy)
		return
	}
	out := bc.Spec.Output.To
	if out == nil || out.Name == "" || (out.Kind != "" && out.Kind != "DockerImage") {
		fail(w, http.StatusBadRequest, "BadRequest",
			"buildconfig %q has no output.to of kind DockerImage: the binary input is stored in the output's repository", name)
		return
	}
	repository, err := artifact.Repository(out.Name)
	if err != nil {
		fail(w, http.StatusBadRequest, "BadRequest", "buildconfig %q: output.to: %v", name, err)
		return
	}
	access, err := h.pushAccess(ctx, bc, out.Name)
	if err != nil {
		fail(w, http.StatusBadRequest, "BadRequest", "buildconfig %q: %v", name, err)
		return
	}
	// The Build is checked (with a placeholder artifact) before the upload.
	if _, err := h.Starter.Check(ctx, ns, name, withArtifact(req, repository+"@sha256:"+strings.Repeat("0", 64))); err != nil {
		h.startFailed(ctx, w, ns, name, err)
		return
	}
	br := bufio.NewReader(r.Body)
	if _, err := br.Peek(1); err != nil {
		fail(w, http.StatusBadRequest, "BadRequest", "the upload is empty: send the archive (or the file) as the request body")
		return
	}
	body := &limitedBody{r: br, left: h.maxBytes()}
	title := "archive"
	if req.Binary.AsFile != "" {
		title = req.Binary.AsFile
	}
	ref, err := artifact.Store(ctx, access, repository, body, title)
	switch {
	case body.over:
		fail(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge",
			"the upload is larger than %d bytes, the limit: send a smaller archive (leave out what the build does not need)", h.maxBytes())
		return
	case err != nil && body.err != nil:
		fail(w, http.StatusBadRequest, "BadRequest", "reading the upload: %v", body.err)
		return
	case err != nil:
		log.FromContext(ctx).Error(err, "binary build: storing the upload", "namespace", ns, "buildConfig", name)
		fail(w, http.StatusBadGateway, "BadGateway", "storing the binary input in %s: %v", repository, err)
		return
	}
	b, err := h.Starter.Start(ctx, ns, name, withArtifact(req, ref))
	if err != nil {
		h.startFailed(ctx, w, ns, name, err)
		return
	}
	log.FromContext(ctx).Info("binary build started", "namespace", ns, "build", b.Name, "user", user.Username,
		"artifact", ref, "bytes", body.n)
	b.SetGroupVersionKind(buildv1.GroupVersion.WithKind("Build"))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(b)
}

func (h *Handler) maxBytes() int64 {
	if h.MaxBytes > 0 {
		return h.MaxBytes
	}
	return DefaultMaxBytes
}

// startFailed answers a failed Check or Start.
func (h *Handler) startFailed(ctx context.Context, w http.ResponseWriter, ns, name string, err error) {
	switch {
	case apierrors.IsNotFound(err):
		fail(w, http.StatusNotFound, "NotFound", "buildconfig %q not found in namespace %q", name, ns)
	case errors.Is(err, instantiate.ErrPaused):
		fail(w, http.StatusConflict, "Conflict", "%v", err)
	case apierrors.IsInvalid(err):
		fail(w, http.StatusUnprocessableEntity, "Invalid", "%s", instantiate.InvalidMessage(err))
	case apierrors.IsForbidden(err):
		fail(w, http.StatusForbidden, "Forbidden", "%v", err)
	default:
		log.FromContext(ctx).Error(err, "binary build: starting", "namespace", ns, "buildConfig", name)
		fail(w, http.StatusInternalServerError, "InternalError", "could not start the build; try again")
	}
}

// user is the uploader, authenticated and authorized for create on
// buildconfigs/instantiatebinary: by the aggregated API's filters
// (Delegated), else here from the bearer token. When it fails, the answer
// is written.
func (h *Handler) user(ctx context.Context, w http.ResponseWriter, r *http.Request, ns, name string) (authenticationv1.UserInfo, bool) {
	if h.Delegated {
		u, ok := request.UserFrom(ctx)
		if !ok {
			fail(w, http.StatusUnauthorized, "Unauthorized", "the request was not authenticated")
			return authenticationv1.UserInfo{}, false
		}
		info := authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
		if extra := u.GetExtra(); len(extra) > 0 {
			info.Extra = map[string]authenticationv1.ExtraValue{}
			for k, v := range extra {
				info.Extra[k] = v
			}
		}
		return info, true
	}
	user, err := h.authenticate(ctx, r)
	if err != nil {
		fail(w, http.StatusUnauthorized, "Unauthorized", "%v", err)
		return user, false
	}
	allowed, err := h.authorize(ctx, user, ns, "buildconfigs", Subresource, name)
	if err != nil {
		log.FromContext(ctx).Error(err, "binary build: SubjectAccessReview", "namespace", ns, "buildConfig", name)
		fail(w, http.StatusInternalServerError, "InternalError", "could not authorize the request; try again")
		return user, false
	}
	if !allowed {
		fail(w, http.StatusForbidden, "Forbidden",
			"User %q cannot create resource \"buildconfigs/%s\" in API group %q in the namespace %q",
			user.Username, Subresource, buildv1.GroupVersion.Group, ns)
		return user, false
	}
	return user, true
}

// authenticate reads the bearer token and asks the apiserver whose it is.
func (h *Handler) authenticate(ctx context.Context, r *http.Request) (authenticationv1.UserInfo, error) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return authenticationv1.UserInfo{}, errors.New("send your Kubernetes bearer token (Authorization: Bearer ...), as kubectl archway start-build does")
	}
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
	if err := h.Client.Create(ctx, tr); err != nil {
		return authenticationv1.UserInfo{}, fmt.Errorf("the token could not be checked: %w", err)
	}
	if !tr.Status.Authenticated {
		return authenticationv1.UserInfo{}, errors.New("the bearer token is not valid (expired, or not a token of this cluster)")
	}
	return tr.Status.User, nil
}

// authorize asks whether user may create resource/subresource (named
// name) in the namespace.
func (h *Handler) authorize(ctx context.Context, user authenticationv1.UserInfo, ns, resource, subresource, name string) (bool, error) {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "create", Group: buildv1.GroupVersion.Group,
			Resource: resource, Subresource: subresource, Name: name,
		},
	}}
	if err := h.Client.Create(ctx, sar); err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}

// pushAccess is h.Access with the credentials of the BuildConfig's push
// secret for the output (anonymous without one).
func (h *Handler) pushAccess(ctx context.Context, bc *buildv1.BuildConfig, output string) (registry.Access, error) {
	access := h.Access
	access.Credential = &types.DockerAuthConfig{}
	ps := bc.Spec.Output.PushSecret
	if ps == nil || ps.Name == "" {
		return access, nil
	}
	s := &corev1.Secret{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: bc.Namespace, Name: ps.Name}, s); err != nil {
		return access, fmt.Errorf("reading the push secret %s: %w", ps.Name, err)
	}
	var k image.Keyring
	var err error
	switch {
	case len(s.Data[corev1.DockerConfigJsonKey]) > 0:
		err = k.AddDockerConfigJSON(s.Data[corev1.DockerConfigJsonKey])
	case len(s.Data[corev1.DockerConfigKey]) > 0:
		err = k.AddDockercfg(s.Data[corev1.DockerConfigKey])
	default:
		err = fmt.Errorf("it holds neither %s nor %s", corev1.DockerConfigJsonKey, corev1.DockerConfigKey)
	}
	if err != nil {
		return access, fmt.Errorf("the push secret %s: %w", ps.Name, err)
	}
	if creds := k.Lookup(output); len(creds) > 0 {
		access.Credential = &types.DockerAuthConfig{Username: creds[0].Username, Password: creds[0].Password, IdentityToken: creds[0].IdentityToken}
	}
	return access, nil
}

func sourceType(bc *buildv1.BuildConfig) buildv1.BuildSourceType {
	s := bc.Spec.Source
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

func withArtifact(req instantiate.Request, ref string) instantiate.Request {
	b := *req.Binary
	b.Artifact = ref
	req.Binary = &b
	return req
}

// requestOf reads the query: OpenShift's BinaryBuildRequestOptions and
// archway's platform lists and env.
func requestOf(r *http.Request) (instantiate.Request, error) {
	q := r.URL.Query()
	req := instantiate.Request{
		TriggeredBy: []buildv1.BuildTriggerCause{{Message: instantiate.CauseManual}},
		Binary:      &buildv1.BinaryBuildSource{AsFile: q.Get("asFile")},
	}
	if f := req.Binary.AsFile; f != "" && (f != path.Base(f) || f == "." || f == ".." || strings.ContainsAny(f, `/\`)) {
		return req, fmt.Errorf("asFile %q must be a file name, without directories", f)
	}
	git := &buildv1.GitSourceRevision{
		Commit:    q.Get("revision.commit"),
		Message:   q.Get("revision.message"),
		Author:    buildv1.SourceControlUser{Name: q.Get("revision.authorName"), Email: q.Get("revision.authorEmail")},
		Committer: buildv1.SourceControlUser{Name: q.Get("revision.committerName"), Email: q.Get("revision.committerEmail")},
	}
	if *git != (buildv1.GitSourceRevision{}) {
		req.Revision = &buildv1.SourceRevision{Type: buildv1.BuildSourceGit, Git: git}
	}
	list := func(key string) []string {
		var out []string
		for _, v := range q[key] {
			for _, p := range strings.Split(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					out = append(out, p)
				}
			}
		}
		return out
	}
	req.Platforms, req.PlatformsAllowedToFail = list("platforms"), list("platformsAllowedToFail")
	for key, to := range map[string]*[]corev1.EnvVar{"env": &req.Env, "buildArg": &req.BuildArgs} {
		for _, kv := range q[key] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return req, fmt.Errorf("%s %q: use NAME=VALUE", key, kv)
			}
			*to = append(*to, corev1.EnvVar{Name: k, Value: v})
		}
	}
	if q.Has("noCache") {
		noCache, err := strconv.ParseBool(q.Get("noCache"))
		if err != nil {
			return req, fmt.Errorf("noCache %q: use true or false", q.Get("noCache"))
		}
		req.NoCache = &noCache
	}
	return req, nil
}

// limitedBody reads the upload up to left bytes; beyond, it fails and
// records that the upload was too large. The error fails the stream, so
// the registry never receives a complete blob.
type limitedBody struct {
	r    io.Reader
	left int64
	n    int64
	over bool
	err  error
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			l.over = true
			return 0, errors.New("the upload is over the size limit")
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	l.left -= int64(n)
	if err != nil && !errors.Is(err, io.EOF) {
		l.err = err
	}
	return n, err
}
