package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestFindAuthFileAuthFile(t *testing.T) {
	configJSON := `{"auths":{"r.example.com":{"auth":"dTpw"}}}`
	legacy := `{"r.example.com":{"auth":"dTpw","email":"a@b"}}`

	t.Run("empty path means none", func(t *testing.T) {
		f, err := FindAuthFile("")
		if err != nil || f != (AuthFile{}) {
			t.Fatalf("FindAuthFile(\"\") = %+v, %v", f, err)
		}
	})
	t.Run("a file", func(t *testing.T) {
		path := write(t, t.TempDir(), "whatever.json", configJSON)
		f, err := FindAuthFile(path)
		if err != nil || f.Path != path || f.Legacy {
			t.Fatalf("got %+v, %v", f, err)
		}
	})
	t.Run("a legacy file", func(t *testing.T) {
		path := write(t, t.TempDir(), "cfg", legacy)
		f, err := FindAuthFile(path)
		if err != nil || !f.Legacy {
			t.Fatalf("got %+v, %v", f, err)
		}
	})
	t.Run("a dockerconfigjson secret mount", func(t *testing.T) {
		dir := t.TempDir()
		path := write(t, dir, ".dockerconfigjson", configJSON)
		write(t, dir, ".dockercfg", legacy)
		f, err := FindAuthFile(dir)
		if err != nil || f.Path != path || f.Legacy {
			t.Fatalf("got %+v, %v", f, err)
		}
	})
	t.Run("a dockercfg secret mount", func(t *testing.T) {
		dir := t.TempDir()
		path := write(t, dir, ".dockercfg", legacy)
		f, err := FindAuthFile(dir)
		if err != nil || f.Path != path || !f.Legacy {
			t.Fatalf("got %+v, %v", f, err)
		}
	})
	t.Run("a directory without a config", func(t *testing.T) {
		_, err := FindAuthFile(t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "holds none of") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a missing path", func(t *testing.T) {
		if _, err := FindAuthFile(filepath.Join(t.TempDir(), "nope")); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("not JSON", func(t *testing.T) {
		if _, err := FindAuthFile(write(t, t.TempDir(), "config.json", "nope")); err == nil {
			t.Fatal("no error")
		}
	})
}

func TestUserAuthFile(t *testing.T) {
	dir := t.TempDir()
	flag := filepath.Join(dir, "flag.json")
	env := filepath.Join(dir, "env.json")
	for _, p := range []string{flag, env} {
		if err := os.WriteFile(p, []byte(`{"auths":{}}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(AuthFileEnv, env)
	if f, err := UserAuthFile(flag); err != nil || f.Path != flag {
		t.Errorf("flag: %+v, %v", f, err)
	}
	if f, err := UserAuthFile(""); err != nil || f.Path != env {
		t.Errorf("$REGISTRY_AUTH_FILE: %+v, %v", f, err)
	}
	t.Setenv(AuthFileEnv, filepath.Join(dir, "missing.json"))
	if _, err := UserAuthFile(""); err == nil || !strings.Contains(err.Error(), "$REGISTRY_AUTH_FILE") {
		t.Errorf("missing: %v", err)
	}
	t.Setenv(AuthFileEnv, "")
	if f, err := UserAuthFile(""); err != nil || f != (AuthFile{}) {
		t.Errorf("none: %+v, %v", f, err)
	}
}
