package registries

import (
	"strings"
	"testing"

	"github.com/archway-build/archway/pkg/registry"
)

// FuzzParseConf: whatever a registries ConfigMap holds, parsing it never
// panics, and what it accepts is a configuration containers/image loads,
// before and after merging into a generated one.
func FuzzParseConf(f *testing.F) {
	for _, s := range []string{
		"[[registry]]\nlocation = \"quay.io\"\n[[registry.mirror]]\nlocation = \"m.example.com\"\npull-from-mirror = \"digest-only\"\n",
		"[[registry]]\nprefix = \"*.example.com\"\nblocked = true\n",
		"[[registry]]\nprefix = \"quay.io/a\"\nlocation = \"q.example.com/b\"\ninsecure = true\nmirror-by-digest-only = true\n",
		"unqualified-search-registries = [\"docker.io\"]\n[aliases]\nx = \"quay.io/x\"\n",
		"credential-helpers = [\"secretservice\"]\n",
		"[[registry]]\nlocation = \"../../etc\"\n",
		"", "[[registry", "x = 1", "\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		conf, err := registry.ParseConf(text)
		if err != nil {
			return
		}
		gen, err := Build(Inputs{Conf: text})
		if err != nil {
			t.Fatalf("ParseConf accepted %q but Build refused it: %v", text, err)
		}
		data, err := registry.EncodeConf(gen.Conf)
		if err != nil {
			t.Fatalf("encoding %+v: %v", conf, err)
		}
		if strings.Contains(string(data), "secretservice") {
			t.Fatalf("a credential helper survived: %s", data)
		}
		if err := registry.CheckConf(data); err != nil {
			t.Fatalf("the generated registries.conf for %q does not load: %v", text, err)
		}
	})
}

// FuzzRegistryCAs: whatever keys and values a CA ConfigMap holds, what is
// accepted names a single directory under the certificate directory.
func FuzzRegistryCAs(f *testing.F) {
	f.Add("registry.example.com..5000", "x")
	f.Add("..", "")
	f.Add("a..b..c", "")
	f.Add("127.0.0.1..5000", "")
	f.Fuzz(func(t *testing.T, key, value string) {
		host, err := RegistryHost(key)
		if err != nil {
			return
		}
		if host == "" || host == "." || host == ".." || strings.ContainsAny(host, "/\\\x00") {
			t.Fatalf("RegistryHost(%q) = %q, not a single directory name", key, host)
		}
		_, _ = ParseRegistryCAs(map[string]string{key: value})
	})
}
