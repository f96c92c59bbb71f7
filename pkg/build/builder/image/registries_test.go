package image

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/pkg/sysregistriesv2"

	"github.com/archway-build/archway/pkg/registry"
)

// confBuilder is a Builder with only what its registries.conf needs.
func confBuilder(t *testing.T, conf string) *Builder {
	t.Helper()
	var regs []sysregistriesv2.Registry
	if conf != "" {
		parsed, err := registry.ParseConf(conf)
		if err != nil {
			t.Fatal(err)
		}
		regs = parsed.Registries
	}
	dir := t.TempDir()
	return &Builder{cfg: Config{Registries: regs}, confDir: dir, emptyDir: filepath.Join(dir, "empty.d"), confFiles: map[string]bool{}}
}

const someDigest = "@sha256:0123456789012345678901234567890123456789012345678901234567890123"

// TestBuildRegistriesConf: the registries.conf a build pulls with holds the
// cluster's mirrors with their kinds (digest-only, tag-only), the
// insecure registries of the operation and loopback mirrors as insecure,
// and resolves short names on Docker Hub.
func TestBuildRegistriesConf(t *testing.T) {
	b := confBuilder(t, `
[[registry]]
location = "quay.io/team"
[[registry.mirror]]
location = "127.0.0.1:5000/mirror"
pull-from-mirror = "tag-only"
[[registry]]
location = "registry.example.com"
[[registry.mirror]]
location = "digests.example.com/r"
pull-from-mirror = "digest-only"
`)
	sys, err := b.systemContext([]string{"quay.io/team/base:1"}, registry.AuthFile{})
	if err != nil {
		t.Fatal(err)
	}
	tried := func(ref string) []string {
		named, err := reference.ParseNormalizedNamed(ref)
		if err != nil {
			t.Fatal(err)
		}
		reg, err := sysregistriesv2.FindRegistry(sys, named.Name())
		if err != nil {
			t.Fatal(err)
		}
		if reg == nil {
			return []string{ref}
		}
		sources, err := reg.PullSourcesFromReference(named)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range sources {
			e := s.Reference.String()
			if s.Endpoint.Insecure {
				e += " (insecure)"
			}
			out = append(out, e)
		}
		return out
	}
	for _, tt := range []struct {
		ref  string
		want string
	}{
		{"quay.io/team/base:1", "127.0.0.1:5000/mirror/base:1 (insecure), quay.io/team/base:1"},
		{"quay.io/team/base" + someDigest, "quay.io/team/base" + someDigest},
		{"registry.example.com/x:1", "registry.example.com/x:1"},
		{"registry.example.com/x" + someDigest, "digests.example.com/r/x" + someDigest + ", registry.example.com/x" + someDigest},
	} {
		if got := strings.Join(tried(tt.ref), ", "); got != tt.want {
			t.Errorf("%s is pulled from %s, want %s", tt.ref, got, tt.want)
		}
	}
	search, err := sysregistriesv2.UnqualifiedSearchRegistries(sys)
	if err != nil || len(search) != 1 || search[0] != "docker.io" {
		t.Errorf("short names are searched in %v (%v), want docker.io", search, err)
	}
}

// TestCheckNotBlocked: an image on a blocked registry is refused unless a
// mirror serves its kind of reference; a push to one is always refused,
// and each message says what to do.
func TestCheckBlocked(t *testing.T) {
	b := confBuilder(t, `
[[registry]]
location = "blocked.example.com"
blocked = true
[[registry]]
location = "quay.io/team"
blocked = true
[[registry.mirror]]
location = "mirror.example.com/team"
pull-from-mirror = "digest-only"
`)
	sys, err := b.systemContext(nil, registry.AuthFile{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		ref  string
		push bool
		want string // part of the message; "" for no error
	}{
		{"blocked.example.com/a:1", false, "no mirror serves it"},
		{"blocked.example.com/a:1", true, "nothing is pushed to it"},
		{"quay.io/team/a" + someDigest, false, ""},
		{"quay.io/team/a:1", false, "name the image by digest"},
		{"quay.io/team/a:1", true, "nothing is pushed to it"},
		{"quay.io/other/a:1", false, ""},
		{"busybox", false, ""},
	} {
		err := registry.CheckBlocked(sys, tt.ref, tt.push)
		var blocked *registry.BlockedError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s (push %v): %v, want no error", tt.ref, tt.push, err)
		case tt.want != "" && (!errors.As(err, &blocked) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s (push %v): %v, want a BlockedError saying %q", tt.ref, tt.push, err, tt.want)
		}
	}
}
