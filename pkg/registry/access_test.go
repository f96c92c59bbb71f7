package registry

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"go.podman.io/image/v5/types"
)

func TestSystemContext(t *testing.T) {
	dir := t.TempDir()
	configJSON := write(t, dir, "config.json", `{"auths":{"r.example.com":{"auth":"dTpw"}}}`)
	// A legacy file under a name that does not say so: what `builder build
	// --authfile` may be given.
	legacyFile := write(t, dir, "creds.json", `{"r.example.com":{"auth":"dTpw"}}`)
	legacyMount := write(t, t.TempDir(), ".dockercfg", `{"r.example.com":{"auth":"dTpw"}}`)
	find := func(path string) AuthFile {
		t.Helper()
		f, err := FindAuthFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	explicit := &types.DockerAuthConfig{Username: "u", Password: "p"}

	tests := []struct {
		name   string
		access Access
		host   string
		// want holds the fields SystemContext decides.
		want types.SystemContext
	}{
		{name: "no credentials: containers/image's default places", host: "r.example.com",
			want: types.SystemContext{}},
		{name: "config.json", access: Access{AuthFile: find(configJSON)}, host: "r.example.com",
			want: types.SystemContext{AuthFilePath: configJSON}},
		{name: "legacy content under any name", access: Access{AuthFile: find(legacyFile)}, host: "r.example.com",
			want: types.SystemContext{LegacyFormatAuthFilePath: legacyFile}},
		{name: "legacy .dockercfg in a secret mount", access: Access{AuthFile: find(filepath.Dir(legacyMount))}, host: "r.example.com",
			want: types.SystemContext{LegacyFormatAuthFilePath: legacyMount}},
		{name: "explicit credentials read no file", access: Access{AuthFile: find(configJSON), Credential: explicit}, host: "r.example.com",
			want: types.SystemContext{DockerAuthConfig: explicit}},
		{name: "explicit anonymous access", access: Access{Credential: &types.DockerAuthConfig{}}, host: "r.example.com",
			want: types.SystemContext{DockerAuthConfig: &types.DockerAuthConfig{}}},
		{name: "a listed registry is insecure", access: Access{InsecureRegistries: []string{"r.example.com:5000"}}, host: "r.example.com:5000",
			want: types.SystemContext{DockerInsecureSkipTLSVerify: types.OptionalBoolTrue}},
		{name: "hosts match exactly, port included", access: Access{InsecureRegistries: []string{"r.example.com"}}, host: "r.example.com:5000",
			want: types.SystemContext{}},
		{name: "a registry not listed is checked", access: Access{InsecureRegistries: []string{"other.example.com"}}, host: "r.example.com",
			want: types.SystemContext{}},
		{name: "all registries", access: Access{InsecureRegistries: []string{AllRegistries}}, host: "r.example.com",
			want: types.SystemContext{DockerInsecureSkipTLSVerify: types.OptionalBoolTrue}},
		{name: "127.0.0.1 is loopback", host: "127.0.0.1:5000",
			want: types.SystemContext{DockerInsecureSkipTLSVerify: types.OptionalBoolTrue}},
		{name: "127.0.0.0/8 is loopback", host: "127.1.2.3",
			want: types.SystemContext{DockerInsecureSkipTLSVerify: types.OptionalBoolTrue}},
		{name: "localhost is loopback", host: "localhost:5000",
			want: types.SystemContext{DockerInsecureSkipTLSVerify: types.OptionalBoolTrue}},
		{name: "::1 is loopback", host: "[::1]:5000",
			want: types.SystemContext{DockerInsecureSkipTLSVerify: types.OptionalBoolTrue}},
		{name: "VerifyLoopback: loopback as any other", access: Access{VerifyLoopback: true}, host: "127.0.0.1:5000",
			want: types.SystemContext{}},
		{name: "VerifyLoopback: a listed loopback registry is insecure", access: Access{VerifyLoopback: true, InsecureRegistries: []string{"127.0.0.1:5000"}}, host: "127.0.0.1:5000",
			want: types.SystemContext{DockerInsecureSkipTLSVerify: types.OptionalBoolTrue}},
		{name: "a private address is not loopback", host: "10.0.0.1:5000",
			want: types.SystemContext{}},
		{name: "no host: checks stay on", access: Access{InsecureRegistries: []string{"r.example.com"}},
			want: types.SystemContext{}},
		{name: "CA directory, registries.conf and user agent",
			access: Access{CertDir: "/certs", RegistriesConfPath: "/r.conf", UserAgent: "archway-test"}, host: "r.example.com",
			want: types.SystemContext{DockerPerHostCertDirPath: "/certs", SystemRegistriesConfPath: "/r.conf", DockerRegistryUserAgent: "archway-test"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.access.SystemContext(tt.host)
			want := tt.want
			if want.DockerRegistryUserAgent == "" {
				want.DockerRegistryUserAgent = defaultUserAgent
			}
			if got.AuthFilePath != want.AuthFilePath || got.LegacyFormatAuthFilePath != want.LegacyFormatAuthFilePath ||
				got.DockerInsecureSkipTLSVerify != want.DockerInsecureSkipTLSVerify ||
				got.DockerPerHostCertDirPath != want.DockerPerHostCertDirPath ||
				got.SystemRegistriesConfPath != want.SystemRegistriesConfPath ||
				got.DockerRegistryUserAgent != want.DockerRegistryUserAgent ||
				(got.DockerAuthConfig == nil) != (want.DockerAuthConfig == nil) ||
				(got.DockerAuthConfig != nil && *got.DockerAuthConfig != *want.DockerAuthConfig) {
				t.Errorf("SystemContext(%q) = %+v\nwant %+v", tt.host, got, want)
			}
			if tt.access.Credential != nil && got.DockerAuthConfig == tt.access.Credential {
				t.Errorf("SystemContext shares the caller's credential; a later change to one would change the other")
			}
		})
	}
}

func TestInsecureHosts(t *testing.T) {
	a := Access{InsecureRegistries: []string{"r.example.com", "b.example.com:5000", AllRegistries}}
	got := a.InsecureHosts("127.0.0.1:5000/app:v1", "docker.io/library/busybox", "b.example.com:5000/x", "not a reference")
	want := "127.0.0.1:5000 b.example.com:5000 docker.io r.example.com"
	if strings.Join(got, " ") != want {
		t.Errorf("InsecureHosts = %q, want %q", got, want)
	}
	a = Access{InsecureRegistries: []string{"r.example.com"}}
	got = a.InsecureHosts("localhost:5000/app", "quay.io/team/app")
	if want := "localhost:5000 r.example.com"; strings.Join(got, " ") != want {
		t.Errorf("InsecureHosts = %q, want %q", got, want)
	}
}

func TestTransportRefusesPlainHTTPToSecureRegistries(t *testing.T) {
	for _, tt := range []struct {
		access Access
		host   string
		plain  bool
	}{
		{host: "r.example.com"},
		{host: "10.0.0.1:5000"},
		{access: Access{InsecureRegistries: []string{"r.example.com"}}, host: "r.example.com", plain: true},
		{host: "127.0.0.1:5000", plain: true},
	} {
		rt, err := tt.access.Transport(tt.host)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, "http://"+tt.host+"/v2/", nil)
		_, isStrict := rt.(httpsOnly)
		if isStrict == tt.plain {
			t.Errorf("Transport(%q) allows plain HTTP: %v, want %v", tt.host, !isStrict, tt.plain)
		}
		if isStrict {
			if _, err := rt.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "only for insecure registries") {
				t.Errorf("plain HTTP to %s: %v", tt.host, err)
			}
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for registry, want := range map[string]bool{
		"127.0.0.1:5000":    true,
		"127.0.0.1":         true,
		"127.1.2.3:80":      true,
		"localhost:5000":    true,
		"localhost":         true,
		"[::1]:5000":        true,
		"registry.local":    false,
		"10.0.0.1:5000":     false,
		"docker.io":         false,
		"localhost.example": false,
	} {
		if got := isLoopback(registry); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", registry, got, want)
		}
	}
}

func TestTransportVerifiesCertificatesOfSecureRegistries(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	for _, tt := range []struct {
		access  Access
		wantErr bool
	}{
		{access: Access{}, wantErr: true},
		{access: Access{InsecureRegistries: []string{"r.example.com"}}},
	} {
		// The host decides the rules; the request goes to the test server.
		rt, err := tt.access.Transport("r.example.com")
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		if (err != nil) != tt.wantErr || (err != nil && !strings.Contains(err.Error(), "certificate")) {
			t.Errorf("%+v: a self-signed certificate gives %v, want an error: %v", tt.access, err, tt.wantErr)
		}
	}
}
