package manifestlist

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/archway-build/archway/pkg/registry"
)

// fakeRegistry speaks just enough of the distribution API for Untag: GET
// /v2/ and DELETE /v2/<name>/manifests/<tag>, behind no auth, Basic auth, or
// Bearer tokens from its own token endpoint.
type fakeRegistry struct {
	t        *testing.T
	auth     string // "", "basic" or "bearer"
	user     string
	password string
	refresh  string // identity token the token endpoint accepts
	tags     map[string]bool
	methodNA bool // answer DELETE with 405, as a registry with deletes disabled does

	mu      sync.Mutex
	deleted []string
	scopes  []string
	tokens  int
	server  *httptest.Server
}

const fakeToken = "t0ken"

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.URL.Path == "/token" {
		f.tokens++
		f.scopes = append(f.scopes, r.URL.Query()["scope"]...)
		if r.Method == http.MethodPost {
			_ = r.ParseForm()
			if r.PostForm.Get("grant_type") != "refresh_token" || r.PostForm.Get("refresh_token") != f.refresh {
				http.Error(w, `{"details":"bad refresh token"}`, http.StatusUnauthorized)
				return
			}
			f.scopes = append(f.scopes, r.PostForm.Get("scope"))
			_ = json.NewEncoder(w).Encode(map[string]string{"access_token": fakeToken})
			return
		}
		if u, p, ok := r.BasicAuth(); !ok || u != f.user || p != f.password {
			http.Error(w, `{"details":"bad credentials"}`, http.StatusUnauthorized)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"token": fakeToken})
		return
	}
	repo, tag, isManifest := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v2/"), "/manifests/")
	authz := r.Header.Get("Authorization")
	switch f.auth {
	case "basic":
		if u, p, ok := r.BasicAuth(); !ok || u != f.user || p != f.password {
			w.Header().Set("WWW-Authenticate", `Basic realm="fake"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	case "bearer":
		if authz != "Bearer "+fakeToken {
			challenge := fmt.Sprintf(`Bearer realm="%s/token",service="fake"`, f.server.URL)
			if isManifest {
				challenge += fmt.Sprintf(`,scope="repository:%s:delete"`, repo)
			}
			w.Header().Set("WWW-Authenticate", challenge)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	switch {
	case r.URL.Path == "/v2/" && r.Method == http.MethodGet:
		w.WriteHeader(http.StatusOK)
	case isManifest && r.Method == http.MethodDelete:
		if f.methodNA {
			http.Error(w, `{"errors":[{"code":"UNSUPPORTED"}]}`, http.StatusMethodNotAllowed)
			return
		}
		if !f.tags[repo+":"+tag] {
			http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN"}]}`, http.StatusNotFound)
			return
		}
		delete(f.tags, repo+":"+tag)
		f.deleted = append(f.deleted, repo+":"+tag)
		w.WriteHeader(http.StatusAccepted)
	default:
		f.t.Errorf("fake registry: unexpected %s %s", r.Method, r.URL.Path)
		w.WriteHeader(http.StatusNotFound)
	}
}

func startFake(t *testing.T, f *fakeRegistry, tls bool) string {
	t.Helper()
	f.t = t
	if tls {
		f.server = httptest.NewTLSServer(f)
	} else {
		f.server = httptest.NewServer(f)
	}
	t.Cleanup(f.server.Close)
	return strings.TrimPrefix(strings.TrimPrefix(f.server.URL, "http://"), "https://")
}

func writeAuthFile(t *testing.T, host string, entry map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	data, err := json.Marshal(map[string]any{"auths": map[string]any{host: entry}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func basicEntry(user, password string) map[string]string {
	return map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte(user + ":" + password))}
}

func TestUntag(t *testing.T) {
	ctx := context.Background()
	tags := func() map[string]bool {
		return map[string]bool{"team/app:v1-linux-amd64": true, "team/app:v1-linux-arm64": true, "team/app:v1": true}
	}
	tests := []struct {
		name        string
		fake        *fakeRegistry
		tls         bool
		insecure    bool
		authEntry   map[string]string
		refs        []string // %s is the registry host
		wantDeleted string
		wantErr     []string
		wantScope   string
	}{
		{
			name: "no auth, plain HTTP when insecure", fake: &fakeRegistry{tags: tags()}, insecure: true,
			refs:        []string{"%s/team/app:v1-linux-amd64", "%s/team/app:v1-linux-arm64"},
			wantDeleted: "team/app:v1-linux-amd64,team/app:v1-linux-arm64",
		},
		{
			name: "TLS with an unverified certificate when insecure", fake: &fakeRegistry{tags: tags()}, tls: true, insecure: true,
			refs: []string{"%s/team/app:v1-linux-amd64"}, wantDeleted: "team/app:v1-linux-amd64",
		},
		{
			name: "basic auth", fake: &fakeRegistry{auth: "basic", user: "u", password: "p", tags: tags()}, insecure: true,
			authEntry: basicEntry("u", "p"),
			refs:      []string{"%s/team/app:v1-linux-amd64", "%s/team/app:v1-linux-arm64"}, wantDeleted: "team/app:v1-linux-amd64,team/app:v1-linux-arm64",
		},
		{
			name: "basic auth, wrong password", fake: &fakeRegistry{auth: "basic", user: "u", password: "p", tags: tags()}, insecure: true,
			authEntry: basicEntry("u", "wrong"),
			refs:      []string{"%s/team/app:v1-linux-amd64"}, wantErr: []string{"refused the credentials", "config.json"},
		},
		{
			name: "basic auth, no credentials", fake: &fakeRegistry{auth: "basic", user: "u", password: "p", tags: tags()}, insecure: true,
			refs: []string{"%s/team/app:v1-linux-amd64"}, wantErr: []string{"requires credentials"},
		},
		{
			name: "bearer token for the challenge's scope", fake: &fakeRegistry{auth: "bearer", user: "u", password: "p", tags: tags()}, insecure: true,
			authEntry: basicEntry("u", "p"),
			refs:      []string{"%s/team/app:v1-linux-amd64", "%s/team/app:v1-linux-arm64"}, wantDeleted: "team/app:v1-linux-amd64,team/app:v1-linux-arm64",
			wantScope: "repository:team/app:push,pull,delete", // go-containerregistry asks for delete with push and pull
		},
		{
			name: "bearer token, wrong password", fake: &fakeRegistry{auth: "bearer", user: "u", password: "p", tags: tags()}, insecure: true,
			authEntry: basicEntry("u", "nope"),
			refs:      []string{"%s/team/app:v1-linux-amd64"}, wantErr: []string{"refused the credentials", "/token"},
		},
		{
			name: "bearer token from an identity token", fake: &fakeRegistry{auth: "bearer", refresh: "refresh-me", tags: tags()}, insecure: true,
			authEntry: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte("<token>:")), "identitytoken": "refresh-me"},
			refs:      []string{"%s/team/app:v1-linux-amd64"}, wantDeleted: "team/app:v1-linux-amd64",
			wantScope: "repository:team/app:push,pull,delete", // go-containerregistry asks for delete with push and pull
		},
		{
			name: "a tag already gone is not an error", fake: &fakeRegistry{tags: tags()}, insecure: true,
			refs: []string{"%s/team/app:v1-linux-s390x", "%s/team/app:v1-linux-amd64"}, wantDeleted: "team/app:v1-linux-amd64",
		},
		{
			name: "deletes disabled", fake: &fakeRegistry{tags: tags(), methodNA: true}, insecure: true,
			refs: []string{"%s/team/app:v1-linux-amd64"}, wantErr: []string{"does not allow deleting tags"},
		},
		{
			name: "never by digest", fake: &fakeRegistry{tags: tags()}, insecure: true,
			refs:        []string{"%s/team/app@sha256:" + strings.Repeat("a", 64), "%s/team/app", "%s/team/app:v1-linux-amd64"},
			wantDeleted: "team/app:v1-linux-amd64",
			wantErr:     []string{"never deletes by digest"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := startFake(t, tt.fake, tt.tls)
			access := registry.Access{AuthFile: registry.AuthFile{Path: filepath.Join(t.TempDir(), "none.json")}}
			if tt.insecure {
				access.InsecureRegistries = []string{registry.AllRegistries}
			}
			if tt.authEntry != nil {
				access.AuthFile = registry.AuthFile{Path: writeAuthFile(t, host, tt.authEntry)}
			}
			var refs []string
			for _, r := range tt.refs {
				refs = append(refs, fmt.Sprintf(r, host))
			}
			err := Untag(ctx, access, refs...)
			if len(tt.wantErr) == 0 && err != nil {
				t.Fatalf("Untag: %v", err)
			}
			for _, want := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Untag error %v does not contain %q", err, want)
				}
			}
			tt.fake.mu.Lock()
			defer tt.fake.mu.Unlock()
			if got := strings.Join(tt.fake.deleted, ","); got != tt.wantDeleted {
				t.Errorf("deleted %q, want %q", got, tt.wantDeleted)
			}
			if !tt.fake.tags["team/app:v1"] {
				t.Errorf("the output tag was removed")
			}
			if tt.wantScope != "" {
				if len(tt.fake.scopes) == 0 || tt.fake.scopes[0] != tt.wantScope {
					t.Errorf("token scopes %q, want %q", tt.fake.scopes, tt.wantScope)
				}
				if tt.fake.tokens != 1 {
					t.Errorf("asked for %d tokens, want 1 (the token is reused)", tt.fake.tokens)
				}
			}
		})
	}
}

func TestUntagLegacyDockerCfg(t *testing.T) {
	f := &fakeRegistry{auth: "basic", user: "u", password: "p", tags: map[string]bool{"app:v1": true, "app:v1-linux-amd64": true}}
	host := startFake(t, f, false)
	path := filepath.Join(t.TempDir(), ".dockercfg")
	data, err := json.Marshal(map[string]any{host: basicEntry("u", "p")}) // no "auths" wrapper
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Untag(context.Background(), registry.Access{AuthFile: registry.AuthFile{Path: path, Legacy: true}}, host+"/app:v1-linux-amd64"); err != nil {
		t.Fatalf("Untag with a legacy .dockercfg: %v", err)
	}
	if len(f.deleted) != 1 {
		t.Fatalf("deleted %q", f.deleted)
	}
}
