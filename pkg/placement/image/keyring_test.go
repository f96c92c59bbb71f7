package image

import (
	"encoding/base64"
	"fmt"
	"testing"
)

func dockerConfig(entries map[string]string) []byte {
	s := `{"auths":{`
	first := true
	for key, user := range entries {
		if !first {
			s += ","
		}
		first = false
		s += fmt.Sprintf(`%q:{"auth":%q}`, key, base64.StdEncoding.EncodeToString([]byte(user+":pw-"+user)))
	}
	return []byte(s + "}}")
}

func users(a Auth) []string {
	var out []string
	for _, c := range a {
		out = append(out, c.Username)
	}
	return out
}

func TestKeyringLookup(t *testing.T) {
	var k Keyring
	if err := k.AddDockerConfigJSON(dockerConfig(map[string]string{
		"registry.example.com":                     "host",
		"registry.example.com/team":                "team",
		"https://index.docker.io/v1/":              "hub",
		"*.mirror.example.com":                     "glob",
		"127.0.0.1:5000":                           "local",
		"http://registry.example.com/teamwork/v2/": "teamwork",
	})); err != nil {
		t.Fatal(err)
	}
	if err := k.AddDockercfg([]byte(`{"registry.example.com":{"username":"legacy","password":"x"}}`)); err != nil {
		t.Fatal(err)
	}
	// A later source with the same credentials as an earlier one adds
	// nothing new.
	if err := k.AddDockerConfigJSON(dockerConfig(map[string]string{"registry.example.com": "host"})); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		image string
		want  []string
	}{
		{"registry.example.com/team/app:1", []string{"team", "host", "legacy"}},
		{"registry.example.com/teamwork/app", []string{"teamwork", "host", "legacy"}},
		{"registry.example.com/other/app", []string{"host", "legacy"}},
		{"registry.example.com/teams/app", []string{"host", "legacy"}},
		{"busybox", []string{"hub"}},
		{"docker.io/library/busybox:latest", []string{"hub"}},
		{"eu.mirror.example.com/x", []string{"glob"}},
		{"a.b.mirror.example.com/x", nil},
		{"127.0.0.1:5000/archway/busybox@sha256:" + fmt.Sprintf("%064d", 0), []string{"local"}},
		{"127.0.0.1:5001/archway/busybox", nil},
		{"quay.io/x/y", nil},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			got := users(k.Lookup(tt.image))
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("Lookup(%q) = %v, want %v", tt.image, got, tt.want)
			}
		})
	}
}

func TestKeyringRejectsBadAuth(t *testing.T) {
	var k Keyring
	if err := k.AddDockerConfigJSON([]byte(`{"auths":{"r":{"auth":"!!"}}}`)); err == nil {
		t.Error("want an error for auth that is not base64")
	}
	if err := k.AddDockerConfigJSON([]byte(`{"auths":{"r":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("nocolon")) + `"}}}`)); err == nil {
		t.Error("want an error for auth without a colon")
	}
	if err := k.AddDockerConfigJSON([]byte(`not json`)); err == nil {
		t.Error("want an error for a config that is not JSON")
	}
}

func TestAuthKey(t *testing.T) {
	a := Auth{{Username: "u", Password: "p"}}
	b := Auth{{Username: "u", Password: "q"}}
	if Auth(nil).Key() != "" {
		t.Error("anonymous access must have the empty key")
	}
	if a.Key() == b.Key() || a.Key() == "" {
		t.Errorf("different credentials must have different keys: %q %q", a.Key(), b.Key())
	}
	if a.Key() != (Auth{{Username: "u", Password: "p"}}).Key() {
		t.Error("equal credentials must have equal keys")
	}
}
