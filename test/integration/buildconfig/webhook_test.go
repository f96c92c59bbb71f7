package buildconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/build/instantiate"
	"github.com/archway-build/archway/pkg/build/trigger/scm"
)

const hookSecret = "7f3c0e2a9b4d4c1e8a6f5b2d"

// hookBC is a BuildConfig with every webhook trigger, each with its secret
// in the Secret "hooks"; the generic one allows env.
func (h *harness) hookBC(name string) *buildv1.BuildConfig {
	h.t.Helper()
	ref := &buildv1.SecretLocalReference{Name: "hooks"}
	bc := h.bcObj(name, buildv1.BuildRunPolicyParallel,
		buildv1.BuildTriggerPolicy{Type: buildv1.GitHubWebHookBuildTriggerType, GitHubWebHook: &buildv1.WebHookTrigger{SecretReference: ref}},
		buildv1.BuildTriggerPolicy{Type: buildv1.GitLabWebHookBuildTriggerType, GitLabWebHook: &buildv1.WebHookTrigger{SecretReference: ref}},
		buildv1.BuildTriggerPolicy{Type: buildv1.BitbucketWebHookBuildTriggerType, BitbucketWebHook: &buildv1.WebHookTrigger{SecretReference: ref}},
		buildv1.BuildTriggerPolicy{Type: buildv1.GenericWebHookBuildTriggerType, GenericWebHook: &buildv1.WebHookTrigger{SecretReference: ref, AllowEnv: true}},
	)
	return bc
}

func (h *harness) hookSecret() {
	h.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hooks", Namespace: h.ns},
		Data: map[string][]byte{buildv1.WebHookSecretKey: []byte(hookSecret)}})
}

// hookServer serves the webhooks over plain HTTP on loopback.
func hookServer(t testing.TB) (*httptest.Server, *scm.Handler) {
	handler := scm.NewHandler(k8s, instantiate.NewStarter(k8s, nil), scm.NewMetrics())
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv, handler
}

func hookURL(srv *httptest.Server, ns, bc, secret, typ string) string {
	return fmt.Sprintf("%s/apis/build.openshift.io/v1/namespaces/%s/buildconfigs/%s/webhooks/%s/%s", srv.URL, ns, bc, secret, typ)
}

type reply struct {
	code int
	body map[string]string
	raw  string
}

func deliver(t testing.TB, method, url string, hdr map[string]string, body []byte) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{code: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func payload(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("../../../pkg/build/trigger/scm/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var jsonType = map[string]string{"Content-Type": "application/json"}

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// TestWebhookPushes: a push of each provider to the BuildConfig's branch
// starts a build whose revision is the pushed commit and whose cause names
// the provider with the secret hidden.
func TestWebhookPushes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "hooks")
	h.hookSecret()
	h.create(h.hookBC("app"))
	srv, _ := hookServer(t)
	cases := []struct {
		typ, file string
		hdr       map[string]string
		commit    string
		author    string
		cause     func(c buildv1.BuildTriggerCause) (string, bool)
	}{
		{"github", "github-push.json", with(jsonType, "X-GitHub-Event", "push"), "9f1c2e9b7c8d4a6f1e0b3c5d7a9e1f2b4c6d8e0a", "Mona Lisa",
			func(c buildv1.BuildTriggerCause) (string, bool) {
				return c.Message, c.GitHubWebHook != nil && c.GitHubWebHook.Secret == "<secret>"
			}},
		{"gitlab", "gitlab-push.json", with(jsonType, "X-Gitlab-Event", "Push Hook"), "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", "Jane Doe",
			func(c buildv1.BuildTriggerCause) (string, bool) {
				return c.Message, c.GitLabWebHook != nil && c.GitLabWebHook.Secret == "<secret>"
			}},
		{"bitbucket", "bitbucket-push.json", with(jsonType, "X-Event-Key", "repo:push"), "709d658dc5b6d6afcd46049c2f332ee3f515a67d", "Ada Lovelace",
			func(c buildv1.BuildTriggerCause) (string, bool) { return c.Message, c.BitbucketWebHook != nil }},
		{"generic", "generic.json", jsonType, "5f2a8b1c9d0e3f4a6b7c8d9e0f1a2b3c4d5e6f70", "Grace Hopper",
			func(c buildv1.BuildTriggerCause) (string, bool) { return c.Message, c.GenericWebHook != nil }},
	}
	for _, tc := range cases {
		t.Run(tc.typ, func(t *testing.T) {
			r := deliver(t, http.MethodPost, hookURL(srv, h.ns, "app", hookSecret, tc.typ), tc.hdr, payload(t, tc.file))
			if r.code != http.StatusOK || r.body["status"] != "started" {
				t.Fatalf("%d %s", r.code, r.raw)
			}
			b := h.build(r.body["build"])
			rev := b.Spec.Revision
			if rev == nil || rev.Git == nil || rev.Git.Commit != tc.commit || rev.Git.Author.Name != tc.author || rev.Git.Message == "" {
				t.Errorf("revision %+v", rev)
			}
			if len(b.Spec.TriggeredBy) != 1 {
				t.Fatalf("triggeredBy %+v", b.Spec.TriggeredBy)
			}
			if msg, ok := tc.cause(b.Spec.TriggeredBy[0]); !ok || !strings.HasSuffix(msg, "WebHook") {
				t.Errorf("cause %+v", b.Spec.TriggeredBy[0])
			}
			if strings.Contains(fmt.Sprint(b.Spec), hookSecret) {
				t.Error("the Build records the secret")
			}
		})
	}
	b := h.build("app-4") // the generic delivery: env allowed, platforms overridden
	if env := b.Spec.Strategy.DockerStrategy.Env; len(env) != 1 || env[0].Name != "RELEASE" || env[0].Value != "1.4" {
		t.Errorf("generic env %v", env)
	}
	if !slices.Equal(b.Spec.Platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("generic platforms %v", b.Spec.Platforms)
	}
}

// TestWebhookNoMatchIsOneAnswer: a wrong secret, an unknown BuildConfig, a
// BuildConfig without that trigger, an unknown type and a missing Secret
// are answered alike, and start nothing.
func TestWebhookNoMatchIsOneAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "hooks-nomatch")
	h.hookSecret()
	h.create(h.hookBC("app"))
	h.create(h.bcObj("plain", buildv1.BuildRunPolicyParallel)) // no triggers
	other := h.hookBC("nosecret")
	other.Spec.Triggers[0].GitHubWebHook.SecretReference.Name = "absent"
	h.create(other)
	srv, _ := hookServer(t)
	push := payload(t, "github-push.json")
	hdr := with(jsonType, "X-GitHub-Event", "push")
	urls := map[string]string{
		"wrong secret":          hookURL(srv, h.ns, "app", hookSecret+"x", "github"),
		"secret prefix":         hookURL(srv, h.ns, "app", hookSecret[:10], "github"),
		"unknown BuildConfig":   hookURL(srv, h.ns, "ghost", hookSecret, "github"),
		"unknown namespace":     hookURL(srv, "no-such-ns", "app", hookSecret, "github"),
		"no such trigger":       hookURL(srv, h.ns, "plain", hookSecret, "github"),
		"unknown type":          hookURL(srv, h.ns, "app", hookSecret, "gitea"),
		"secret's Secret gone":  hookURL(srv, h.ns, "nosecret", hookSecret, "github"),
		"other type's URL used": hookURL(srv, h.ns, "plain", hookSecret, "generic"),
	}
	var first *reply
	for name, url := range urls {
		r := deliver(t, http.MethodPost, url, hdr, push)
		if r.code != http.StatusNotFound {
			t.Errorf("%s: %d %s, want 404", name, r.code, r.raw)
		}
		if first == nil {
			first = &r
		} else if r.raw != first.raw {
			t.Errorf("%s answered %q, others %q: the answer tells cases apart", name, r.raw, first.raw)
		}
	}
	if names := h.buildNames(); len(names) != 0 {
		t.Errorf("builds %v started", names)
	}
}

// TestWebhookBadInput: each bad delivery gets its 4xx, saying why, and
// starts nothing (lastVersion stays 0).
func TestWebhookBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "hooks-bad")
	h.hookSecret()
	h.create(h.hookBC("app"))
	srv, handler := hookServer(t)
	handler.MaxBodyBytes = 64 << 10
	gh := hookURL(srv, h.ns, "app", hookSecret, "github")
	generic := hookURL(srv, h.ns, "app", hookSecret, "generic")
	push := payload(t, "github-push.json")
	pushHdr := with(jsonType, "X-GitHub-Event", "push")
	huge := append([]byte(`{"ref":"refs/heads/main","pad":"`), bytes.Repeat([]byte("a"), 70<<10)...)
	huge = append(huge, `"}`...)
	cases := []struct {
		name   string
		method string
		url    string
		hdr    map[string]string
		body   []byte
		code   int
		says   string
	}{
		{"GET", http.MethodGet, gh, pushHdr, nil, http.StatusMethodNotAllowed, "use POST"},
		{"oversize", http.MethodPost, gh, pushHdr, huge, http.StatusRequestEntityTooLarge, "larger than 65536 bytes"},
		{"malformed JSON", http.MethodPost, gh, pushHdr, push[:200], http.StatusBadRequest, "malformed JSON"},
		{"unknown GitHub event", http.MethodPost, gh, with(jsonType, "X-GitHub-Event", "issues"), push, http.StatusBadRequest, `unsupported GitHub event "issues"`},
		{"no event header", http.MethodPost, gh, jsonType, push, http.StatusBadRequest, "missing X-GitHub-Event"},
		{"not JSON", http.MethodPost, gh, with(nil, "X-GitHub-Event", "push", "Content-Type", "application/x-www-form-urlencoded"), []byte("payload=%7B%7D"), http.StatusUnsupportedMediaType, "application/json"},
		{"commit that is not a hash", http.MethodPost, gh, pushHdr,
			[]byte(`{"ref":"refs/heads/main","head_commit":{"id":"--upload-pack=touch /tmp/pwned"}}`), http.StatusBadRequest, "is not a Git commit hash"},
		{"generic env valueFrom", http.MethodPost, generic, jsonType,
			[]byte(`{"env":[{"name":"TOKEN","valueFrom":{"secretKeyRef":{"name":"hooks","key":"WebHookSecretKey"}}}]}`), http.StatusBadRequest, "valueFrom is not allowed"},
		{"generic bad platform", http.MethodPost, generic, jsonType, []byte(`{"platforms":["linux/ARM64"]}`), http.StatusUnprocessableEntity, `"linux/ARM64": use lowercase ("linux/arm64")`},
		{"generic allowed-to-fail not a subset", http.MethodPost, generic, jsonType,
			[]byte(`{"platforms":["linux/amd64"],"platformsAllowedToFail":["linux/s390x"]}`), http.StatusUnprocessableEntity, `"linux/s390x" is not in platforms`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := deliver(t, tc.method, tc.url, tc.hdr, tc.body)
			if r.code != tc.code || !strings.Contains(r.body["message"], tc.says) {
				t.Errorf("%d %s, want %d saying %q", r.code, r.raw, tc.code, tc.says)
			}
		})
	}
	if names, lv := h.buildNames(), h.bc("app").Status.LastVersion; len(names) != 0 || lv != 0 {
		t.Errorf("builds %v, lastVersion %d: bad input started something", names, lv)
	}
}

// TestWebhookNoBuild: a ping, a push to another branch and a deleted
// branch are answered 200 and start nothing; env is ignored (and said so)
// when the trigger does not allow it.
func TestWebhookNoBuild(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "hooks-skip")
	h.hookSecret()
	bc := h.hookBC("app")
	bc.Spec.Triggers[3].GenericWebHook.AllowEnv = false
	h.create(bc)
	srv, _ := hookServer(t)
	gh := hookURL(srv, h.ns, "app", hookSecret, "github")
	ping := deliver(t, http.MethodPost, gh, with(jsonType, "X-GitHub-Event", "ping"), payload(t, "github-ping.json"))
	if ping.code != http.StatusOK || ping.body["status"] != "skipped" || !strings.Contains(ping.body["message"], "ping") {
		t.Errorf("ping: %d %s", ping.code, ping.raw)
	}
	dev := bytes.Replace(payload(t, "github-push.json"), []byte(`"refs/heads/main"`), []byte(`"refs/heads/dev"`), 1)
	r := deliver(t, http.MethodPost, gh, with(jsonType, "X-GitHub-Event", "push"), dev)
	if r.code != http.StatusOK || r.body["status"] != "skipped" || !strings.Contains(r.body["message"], "the BuildConfig builds main") {
		t.Errorf("push to dev: %d %s", r.code, r.raw)
	}
	gl := bytes.Replace(payload(t, "gitlab-push.json"), []byte(`"refs/heads/main"`), []byte(`"refs/heads/feature"`), 1)
	r = deliver(t, http.MethodPost, hookURL(srv, h.ns, "app", hookSecret, "gitlab"), with(jsonType, "X-Gitlab-Event", "Push Hook"), gl)
	if r.code != http.StatusOK || r.body["status"] != "skipped" {
		t.Errorf("gitlab push to feature: %d %s", r.code, r.raw)
	}
	del := []byte(`{"ref":"refs/heads/main","deleted":true,"after":"0000000000000000000000000000000000000000","head_commit":null}`)
	r = deliver(t, http.MethodPost, gh, with(jsonType, "X-GitHub-Event", "push"), del)
	if r.code != http.StatusOK || r.body["status"] != "skipped" {
		t.Errorf("deleted branch: %d %s", r.code, r.raw)
	}
	if names := h.buildNames(); len(names) != 0 {
		t.Fatalf("builds %v started", names)
	}
	r = deliver(t, http.MethodPost, hookURL(srv, h.ns, "app", hookSecret, "generic"), jsonType, []byte(`{"env":[{"name":"RELEASE","value":"2"}]}`))
	if r.code != http.StatusOK || !strings.Contains(r.body["message"], "env ignored") {
		t.Fatalf("generic with env: %d %s", r.code, r.raw)
	}
	if env := h.build(r.body["build"]).Spec.Strategy.DockerStrategy.Env; len(env) != 0 {
		t.Errorf("env %v set though the trigger does not allow it", env)
	}
}

// BenchmarkWebhookToBuild: 50 concurrent GitHub push deliveries to one
// BuildConfig; prints p50/p99 of delivery to Build created (the answer
// comes after the create).
func BenchmarkWebhookToBuild(b *testing.B) {
	h := newHarness(b, "hooks-bench")
	ns := h.ns
	h.hookSecret()
	h.create(h.hookBC("app"))
	srv, _ := hookServer(b)
	push := payload(b, "github-push.json")
	hdr := with(jsonType, "X-GitHub-Event", "push")
	url := hookURL(srv, ns, "app", hookSecret, "github")
	const concurrent = 50
	var all []time.Duration
	for b.Loop() {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() {
				start := time.Now()
				r := deliver(b, http.MethodPost, url, hdr, push)
				d := time.Since(start)
				if r.code != http.StatusOK {
					b.Errorf("%d %s", r.code, r.raw)
				}
				mu.Lock()
				all = append(all, d)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	pct := func(p float64) time.Duration { return all[int(float64(len(all)-1)*p)] }
	b.ReportMetric(float64(pct(0.5).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(pct(0.99).Milliseconds()), "p99-ms")
	fmt.Printf("webhook -> Build created, %d concurrent deliveries to one BuildConfig, %d deliveries: p50 %v, p99 %v, max %v\n",
		concurrent, len(all), pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), all[len(all)-1].Round(time.Millisecond))
}
