package registry

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestMergeAccountAuth(t *testing.T) {
	dir, work := t.TempDir(), t.TempDir()
	write := func(sub, name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, sub, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if f, err := MergeAccountAuth(filepath.Join(dir, "none"), work); err != nil || f != (AuthFile{}) {
		t.Fatalf("no mount: %+v, %v", f, err)
	}
	write("0", ".dockerconfigjson", `{"auths":{"a.example":{"auth":"Zmlyc3Q6MQ=="}}}`)
	write("1", "token", `not a docker config`)
	write("2", ".dockercfg", `{"a.example":{"auth":"c2Vjb25kOjI="},"b.example":{"auth":"Yjoz"}}`)
	write("10", ".dockerconfigjson", `{"auths":{"c.example":{"auth":"Yzo0"}}}`)
	f, err := MergeAccountAuth(dir, work)
	if err != nil || f.Legacy || f.Path == "" {
		t.Fatalf("%+v, %v", f, err)
	}
	data, err := os.ReadFile(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Auths map[string]struct{ Auth string } `json:"auths"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a.example": "Zmlyc3Q6MQ==", "b.example": "Yjoz", "c.example": "Yzo0"}
	if len(got.Auths) != len(want) {
		t.Fatalf("auths %v, want %v", got.Auths, want)
	}
	for k, v := range want {
		if got.Auths[k].Auth != v {
			t.Errorf("%s: %q, want %q (the first secret naming a registry wins)", k, got.Auths[k].Auth, v)
		}
	}

	for host, want := range map[string]string{"a.example": "0", "b.example": "2", "c.example": "10", "d.example": ""} {
		f, err := AccountAuthFor(dir, host)
		if err != nil {
			t.Fatal(err)
		}
		if got := filepath.Base(filepath.Dir(f.Path)); (want == "" && f.Path != "") || (want != "" && got != want) {
			t.Errorf("%s: %+v, want the secret in %q", host, f, want)
		}
	}
}
