package registry

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDockerConfig: whatever a mounted docker config holds, reading it
// never panics; a file that is not a JSON object is an error naming the
// file; the format is the content's (config.json when it has auths or
// credHelpers, else legacy .dockercfg), never the file name's.
func FuzzDockerConfig(f *testing.F) {
	for _, s := range []string{
		`{"auths":{"registry.example.com":{"auth":"dXNlcjpwYXNz"}}}`,
		`{"registry.example.com":{"auth":"dXNlcjpwYXNz","email":"a@b"}}`,
		`{"credHelpers":{"ecr":"ecr-login"}}`,
		`{}`, `[]`, `null`, `"auths"`, `{"auths":null}`, `{"auths":`, "\xff", ``,
	} {
		f.Add([]byte(s), ".dockerconfigjson")
		f.Add([]byte(s), ".dockercfg")
	}
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		if name != ".dockerconfigjson" && name != ".dockercfg" && name != "config.json" {
			name = "config.json"
		}
		dir := t.TempDir()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := FindAuthFile(dir)
		var top map[string]json.RawMessage
		isObject := json.Unmarshal(data, &top) == nil
		switch {
		case !isObject && err == nil:
			t.Fatalf("FindAuthFile accepted %q, which is no JSON object", data)
		case isObject && err != nil:
			t.Fatalf("FindAuthFile refused the JSON object %q: %v", data, err)
		case err != nil:
			return
		}
		if got.Path != path {
			t.Fatalf("found %s, want %s", got.Path, path)
		}
		_, auths := top["auths"]
		_, helpers := top["credHelpers"]
		if want := !auths && !helpers && len(top) > 0; got.Legacy != want {
			t.Fatalf("Legacy = %v for %q, want %v", got.Legacy, data, want)
		}
	})
}
