package buildconfig

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/trigger/scm"
)

// githubSignature is GitHub's X-Hub-Signature-256 of body with key.
func githubSignature(key string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// TestWebhookSignatures: a GitHub delivery signed with the trigger's
// secret (X-Hub-Signature-256) or a GitLab one carrying it in
// X-Gitlab-Token starts a build whatever the URL's secret segment says, so
// the secret need never be in a URL; a signature that does not verify is
// refused even with the right secret in the URL (the signature decides);
// an unsigned delivery with the URL's secret still starts one, as in
// OpenShift.
func TestWebhookSignatures(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "hooks-signed")
	h.hookSecret()
	h.create(h.hookBC("app"))
	srv, _ := hookServer(t)
	github := payload(t, "github-push.json")
	gitlab := payload(t, "gitlab-push.json")
	ghHdr := with(jsonType, "X-GitHub-Event", "push")
	glHdr := with(jsonType, "X-Gitlab-Event", "Push Hook")
	const placeholder = "signed"
	for _, tc := range []struct {
		name, typ, urlSecret string
		hdr                  map[string]string
		body                 []byte
		started              bool
	}{
		{"GitHub, signed, no secret in the URL", "github", placeholder,
			with(ghHdr, "X-Hub-Signature-256", githubSignature(hookSecret, github)), github, true},
		{"GitHub, unsigned, the secret in the URL", "github", hookSecret, ghHdr, github, true},
		{"GitHub, signed with another key, the secret in the URL", "github", hookSecret,
			with(ghHdr, "X-Hub-Signature-256", githubSignature("not-"+hookSecret, github)), github, false},
		{"GitHub, the signature of another body", "github", placeholder,
			with(ghHdr, "X-Hub-Signature-256", githubSignature(hookSecret, gitlab)), github, false},
		{"GitHub, a malformed signature", "github", hookSecret,
			with(ghHdr, "X-Hub-Signature-256", "sha1=00"), github, false},
		{"GitLab, the token header, no secret in the URL", "gitlab", placeholder,
			with(glHdr, "X-Gitlab-Token", hookSecret), gitlab, true},
		{"GitLab, a wrong token, the secret in the URL", "gitlab", hookSecret,
			with(glHdr, "X-Gitlab-Token", hookSecret+"x"), gitlab, false},
		{"GitLab, no token, a placeholder in the URL", "gitlab", placeholder, glHdr, gitlab, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.buildNames())
			r := deliver(t, http.MethodPost, hookURL(srv, h.ns, "app", tc.urlSecret, tc.typ), tc.hdr, tc.body)
			if tc.started {
				if r.code != http.StatusOK || r.body["status"] != "started" {
					t.Fatalf("%d %s, want a build started", r.code, r.raw)
				}
				return
			}
			if r.code != http.StatusNotFound || r.body["message"] != "no webhook trigger matches this URL" {
				t.Errorf("%d %s, want the 404 of every miss", r.code, r.raw)
			}
			if after := len(h.buildNames()); after != before {
				t.Errorf("%d builds, want %d: a refused delivery started one", after, before)
			}
		})
	}
}

// TestWebhookFailureLimit: a client address that failed more than the
// limit is answered 429 with Retry-After, whatever it sends (the right
// secret too), and starts nothing until the limit refills.
func TestWebhookFailureLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "hooks-limit")
	h.hookSecret()
	h.create(h.hookBC("app"))
	const burst = 3
	handler := scm.NewHandlerWithFailureLimit(k8s, instantiate.NewStarter(k8s, nil), scm.NewMetrics(), burst, time.Hour)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	push := payload(t, "github-push.json")
	hdr := with(jsonType, "X-GitHub-Event", "push")
	for i := range burst {
		if r := deliver(t, http.MethodPost, hookURL(srv, h.ns, "app", "guess", "github"), hdr, push); r.code != http.StatusNotFound {
			t.Fatalf("failure %d: %d %s, want 404", i+1, r.code, r.raw)
		}
	}
	for _, secret := range []string{"guess", hookSecret} {
		r := deliver(t, http.MethodPost, hookURL(srv, h.ns, "app", secret, "github"), hdr, push)
		if r.code != http.StatusTooManyRequests || r.body["status"] != "rate_limited" {
			t.Errorf("after %d failures: %d %s, want 429", burst, r.code, r.raw)
		}
	}
	if names := h.buildNames(); len(names) != 0 {
		t.Errorf("builds %v started by a limited client", names)
	}
}

// TestWebhookReadsFromCaches: with BuildConfigs and trigger Secrets read
// from informer caches (as build-controller serves the webhooks), a
// delivery starts a build, a rotated secret takes effect, and a flood of
// deliveries to unknown BuildConfigs and with wrong secrets sends the
// apiserver no request at all: a miss costs what a hit does.
func TestWebhookReadsFromCaches(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "hooks-cache")
	h.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hooks", Namespace: h.ns, Annotations: map[string]string{"note": "x"}},
		Data: map[string][]byte{buildv1.WebHookSecretKey: []byte(hookSecret), "other": []byte("not for the cache")}})
	h.create(h.hookBC("app"))
	var requests atomic.Int64
	cfg := rest.CopyConfig(testBed.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			requests.Add(1)
			return rt.RoundTrip(r)
		})
	})
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Transform: scm.TrimSecret}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	t.Cleanup(cancel)
	for _, obj := range []client.Object{&buildv1.BuildConfig{}, &corev1.Secret{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the caches never synced")
	}
	var reader client.Reader = c
	handler := scm.NewHandlerWithFailureLimit(reader, instantiate.NewStarter(k8s, nil), scm.NewMetrics(), 1000, time.Millisecond)
	handler.Secrets = reader
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	push := payload(t, "github-push.json")
	hdr := with(jsonType, "X-GitHub-Event", "push")

	cached := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: "hooks"}, cached); err != nil {
		t.Fatal(err)
	}
	if len(cached.Data) != 1 || cached.Annotations != nil || cached.ManagedFields != nil {
		t.Errorf("the cached Secret holds more than its WebHookSecretKey: %+v", cached)
	}

	settled := requests.Load()
	for i := range 50 {
		url := hookURL(srv, h.ns, "ghost", hookSecret, "github")
		if i%2 == 1 {
			url = hookURL(srv, h.ns, "app", "wrong", "github")
		}
		if r := deliver(t, http.MethodPost, url, hdr, push); r.code != http.StatusNotFound {
			t.Fatalf("%d %s, want 404", r.code, r.raw)
		}
	}
	if n := requests.Load() - settled; n != 0 {
		t.Errorf("50 missed deliveries sent the apiserver %d requests, want none", n)
	}

	if r := deliver(t, http.MethodPost, hookURL(srv, h.ns, "app", hookSecret, "github"), hdr, push); r.code != http.StatusOK {
		t.Fatalf("%d %s, want a build started", r.code, r.raw)
	}
	s := &corev1.Secret{}
	if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "hooks"}, s); err != nil {
		t.Fatal(err)
	}
	s.Data[buildv1.WebHookSecretKey] = []byte("rotated-" + hookSecret)
	if err := k8s.Update(h.ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := waitPoll(h.ctx, func() bool {
		return deliver(t, http.MethodPost, hookURL(srv, h.ns, "app", "rotated-"+hookSecret, "github"), hdr, push).code == http.StatusOK
	}); err != nil {
		t.Fatal("the rotated secret never started a build")
	}
	if r := deliver(t, http.MethodPost, hookURL(srv, h.ns, "app", hookSecret, "github"), hdr, push); r.code != http.StatusNotFound {
		t.Errorf("the old secret after rotation: %d %s, want 404", r.code, r.raw)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
