package registries

import (
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/google/go-cmp/cmp"
	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func idms(name string, mirrors ...configv1.ImageDigestMirrors) configv1.ImageDigestMirrorSet {
	return configv1.ImageDigestMirrorSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: configv1.ImageDigestMirrorSetSpec{ImageDigestMirrors: mirrors}}
}

func itms(name string, mirrors ...configv1.ImageTagMirrors) configv1.ImageTagMirrorSet {
	return configv1.ImageTagMirrorSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: configv1.ImageTagMirrorSetSpec{ImageTagMirrors: mirrors}}
}

const digestRef = "@sha256:0123456789012345678901234567890123456789012345678901234567890123"

// TestBuildResolves checks the translated configuration by what a node
// would do with it: the endpoints containers/image tries, in order, for a
// reference, and whether the source is blocked.
func TestBuildResolves(t *testing.T) {
	tests := []struct {
		name string
		in   Inputs
		ref  string
		// want are the references tried in order; "blocked" ends the list
		// when the source is blocked.
		want []string
	}{
		{name: "no configuration: the source alone", ref: "quay.io/team/app:v1",
			want: []string{"quay.io/team/app:v1"}},
		{name: "a digest mirror serves a digest reference, then the source",
			in:   Inputs{DigestMirrorSets: []configv1.ImageDigestMirrorSet{idms("a", configv1.ImageDigestMirrors{Source: "quay.io/team", Mirrors: []configv1.ImageMirror{"mirror.example.com/team"}})}},
			ref:  "quay.io/team/app" + digestRef,
			want: []string{"mirror.example.com/team/app" + digestRef, "quay.io/team/app" + digestRef}},
		{name: "a digest mirror does not serve a tag",
			in:   Inputs{DigestMirrorSets: []configv1.ImageDigestMirrorSet{idms("a", configv1.ImageDigestMirrors{Source: "quay.io/team", Mirrors: []configv1.ImageMirror{"mirror.example.com/team"}})}},
			ref:  "quay.io/team/app:v1",
			want: []string{"quay.io/team/app:v1"}},
		{name: "a tag mirror serves a tag, not a digest",
			in:   Inputs{TagMirrorSets: []configv1.ImageTagMirrorSet{itms("a", configv1.ImageTagMirrors{Source: "quay.io/team", Mirrors: []configv1.ImageMirror{"tags.example.com/team"}})}},
			ref:  "quay.io/team/app:v1",
			want: []string{"tags.example.com/team/app:v1", "quay.io/team/app:v1"}},
		{name: "a tag mirror is not used for a digest",
			in:   Inputs{TagMirrorSets: []configv1.ImageTagMirrorSet{itms("a", configv1.ImageTagMirrors{Source: "quay.io/team", Mirrors: []configv1.ImageMirror{"tags.example.com/team"}})}},
			ref:  "quay.io/team/app" + digestRef,
			want: []string{"quay.io/team/app" + digestRef}},
		{name: "both kinds on one source, each for its references",
			in: Inputs{
				DigestMirrorSets: []configv1.ImageDigestMirrorSet{idms("a", configv1.ImageDigestMirrors{Source: "quay.io/team", Mirrors: []configv1.ImageMirror{"d.example.com/team"}})},
				TagMirrorSets:    []configv1.ImageTagMirrorSet{itms("a", configv1.ImageTagMirrors{Source: "quay.io/team", Mirrors: []configv1.ImageMirror{"t.example.com/team"}})},
			},
			ref:  "quay.io/team/app:v1",
			want: []string{"t.example.com/team/app:v1", "quay.io/team/app:v1"}},
		{name: "NeverContactSource: mirrors only",
			in: Inputs{DigestMirrorSets: []configv1.ImageDigestMirrorSet{idms("a", configv1.ImageDigestMirrors{
				Source: "quay.io/team", Mirrors: []configv1.ImageMirror{"m1.example.com/team", "m2.example.com/t"}, MirrorSourcePolicy: configv1.NeverContactSource})}},
			ref:  "quay.io/team/app" + digestRef,
			want: []string{"m1.example.com/team/app" + digestRef, "m2.example.com/t/app" + digestRef, "quay.io/team/app" + digestRef, "blocked"}},
		{name: "sets merge in name order, mirrors in listed order",
			in: Inputs{DigestMirrorSets: []configv1.ImageDigestMirrorSet{
				idms("b", configv1.ImageDigestMirrors{Source: "quay.io", Mirrors: []configv1.ImageMirror{"second.example.com"}}),
				idms("a", configv1.ImageDigestMirrors{Source: "quay.io", Mirrors: []configv1.ImageMirror{"first.example.com", "second.example.com"}}),
			}},
			ref:  "quay.io/team/app" + digestRef,
			want: []string{"first.example.com/team/app" + digestRef, "second.example.com/team/app" + digestRef, "quay.io/team/app" + digestRef}},
		{name: "the longest prefix wins", in: Inputs{DigestMirrorSets: []configv1.ImageDigestMirrorSet{idms("a",
			configv1.ImageDigestMirrors{Source: "quay.io", Mirrors: []configv1.ImageMirror{"all.example.com"}},
			configv1.ImageDigestMirrors{Source: "quay.io/team/app", Mirrors: []configv1.ImageMirror{"app.example.com/app"}})}},
			ref:  "quay.io/team/app" + digestRef,
			want: []string{"app.example.com/app" + digestRef, "quay.io/team/app" + digestRef}},
		{name: "a wildcard source keeps the host", in: Inputs{DigestMirrorSets: []configv1.ImageDigestMirrorSet{idms("a",
			configv1.ImageDigestMirrors{Source: "*.example.com", Mirrors: []configv1.ImageMirror{"mirror.local"}})}},
			ref:  "r.example.com/team/app" + digestRef,
			want: []string{"mirror.local/team/app" + digestRef, "r.example.com/team/app" + digestRef}},
		{name: "the ConfigMap's registries.conf", in: Inputs{Conf: `
[[registry]]
location = "quay.io"
[[registry.mirror]]
location = "mirror.example.com"
`}, ref: "quay.io/team/app:v1", want: []string{"mirror.example.com/team/app:v1", "quay.io/team/app:v1"}},
		{name: "mirror-by-digest-only beside a tag mirror set becomes per mirror", in: Inputs{
			Conf: `
[[registry]]
location = "quay.io"
mirror-by-digest-only = true
[[registry.mirror]]
location = "d.example.com"
`, TagMirrorSets: []configv1.ImageTagMirrorSet{itms("a", configv1.ImageTagMirrors{Source: "quay.io", Mirrors: []configv1.ImageMirror{"t.example.com"}})}},
			ref: "quay.io/app:v1", want: []string{"t.example.com/app:v1", "quay.io/app:v1"}},
		{name: "a blocked registry in the ConfigMap", in: Inputs{Conf: `
[[registry]]
location = "evil.example.com"
blocked = true
`}, ref: "evil.example.com/app:v1", want: []string{"evil.example.com/app:v1", "blocked"}},
		{name: "a repository inside a blocked registry is blocked, its mirrors used", in: Inputs{
			Conf:             "[[registry]]\nlocation = \"evil.example.com\"\nblocked = true\n",
			DigestMirrorSets: []configv1.ImageDigestMirrorSet{idms("a", configv1.ImageDigestMirrors{Source: "evil.example.com/team", Mirrors: []configv1.ImageMirror{"good.example.com/team"}})},
		}, ref: "evil.example.com/team/app" + digestRef, want: []string{"good.example.com/team/app" + digestRef, "evil.example.com/team/app" + digestRef, "blocked"}},
		{name: "the base file first, the ConfigMap adds mirrors", in: Inputs{
			Base: "[[registry]]\nlocation = \"quay.io\"\n[[registry.mirror]]\nlocation = \"base.example.com\"\n",
			Conf: "[[registry]]\nlocation = \"quay.io\"\n[[registry.mirror]]\nlocation = \"cm.example.com\"\n",
		}, ref: "quay.io/app:v1", want: []string{"base.example.com/app:v1", "cm.example.com/app:v1", "quay.io/app:v1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gen, err := Build(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			set, err := NewStore(t.TempDir()).Update(gen)
			if err != nil {
				t.Fatal(err)
			}
			named, err := reference.ParseNormalizedNamed(tt.ref)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			reg, err := set.Registry(named.Name())
			if err != nil {
				t.Fatal(err)
			}
			if reg == nil {
				got = []string{named.String()}
			} else {
				sources, err := reg.PullSourcesFromReference(named)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range sources {
					got = append(got, s.Reference.String())
				}
				if reg.Blocked {
					got = append(got, "blocked")
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("endpoints tried (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInsecureRegistriesAreMarked(t *testing.T) {
	gen, err := Build(Inputs{InsecureRegistries: []string{"plain.example.com:5000", "*"}})
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewStore(t.TempDir()).Update(gen)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := set.Registry("plain.example.com:5000/app")
	if err != nil || reg == nil || !reg.Insecure {
		t.Fatalf("plain.example.com:5000 = %+v, %v; want an insecure entry", reg, err)
	}
	if reg, _ := set.Registry("other.example.com/app"); reg != nil {
		t.Errorf("other.example.com has an entry %+v; want none", reg)
	}
	// A repository entry inside an insecure registry is insecure too.
	gen, err = Build(Inputs{InsecureRegistries: []string{"plain.example.com:5000"}, Conf: "[[registry]]\nlocation = \"plain.example.com:5000/team\"\n"})
	if err != nil {
		t.Fatal(err)
	}
	if set, err = NewStore(t.TempDir()).Update(gen); err != nil {
		t.Fatal(err)
	}
	if reg, err := set.Registry("plain.example.com:5000/team/app"); err != nil || reg == nil || !reg.Insecure {
		t.Errorf("plain.example.com:5000/team = %+v, %v; want it insecure", reg, err)
	}
	// A mirror on an insecure registry is reached as insecure too.
	gen, err = Build(Inputs{InsecureRegistries: []string{"plain.example.com:5000"}, DigestMirrorSets: []configv1.ImageDigestMirrorSet{
		idms("a", configv1.ImageDigestMirrors{Source: "quay.io/team", Mirrors: []configv1.ImageMirror{"plain.example.com:5000/team", "tls.example.com/team"}})}})
	if err != nil {
		t.Fatal(err)
	}
	if set, err = NewStore(t.TempDir()).Update(gen); err != nil {
		t.Fatal(err)
	}
	reg, err = set.Registry("quay.io/team/app")
	if err != nil || reg == nil || len(reg.Mirrors) != 2 {
		t.Fatalf("quay.io/team = %+v, %v; want two mirrors", reg, err)
	}
	if !reg.Mirrors[0].Insecure || reg.Mirrors[1].Insecure {
		t.Errorf("mirrors %+v: want the one on plain.example.com:5000 alone insecure", reg.Mirrors)
	}
	if reg, _ := set.Registry("other.example.com/app"); reg != nil {
		t.Errorf("other.example.com has an entry %+v; want none", reg)
	}
}

func TestBuildRefusesBadInput(t *testing.T) {
	tests := []struct {
		name string
		in   Inputs
		want string
	}{
		{"not TOML", Inputs{Conf: "[[registry"}, "registries ConfigMap's registries.conf: not a registries.conf"},
		{"a misspelt key", Inputs{Conf: "[[registry]]\nlocation = \"quay.io\"\nblockd = true\n"}, "unknown keys registry.blockd"},
		{"version 1", Inputs{Conf: "[registries.search]\nregistries = [\"quay.io\"]\n"}, "unknown keys"},
		{"no location or prefix", Inputs{Conf: "[[registry]]\ninsecure = true\n"}, "neither prefix nor location"},
		{"a bad pull-from-mirror", Inputs{Conf: "[[registry]]\nlocation = \"quay.io\"\n[[registry.mirror]]\nlocation = \"m.example.com\"\npull-from-mirror = \"sometimes\"\n"}, "unsupported pull-from-mirror"},
		{"conflicting blocked", Inputs{Conf: "[[registry]]\nprefix = \"a.example.com\"\nlocation = \"quay.io\"\nblocked = true\n[[registry]]\nlocation = \"quay.io\"\n"}, "conflicting 'blocked'"},
		{"the base file", Inputs{Base: "x = ["}, "registriesConfPath: not a registries.conf"},
		{"a CA key with a path", Inputs{RegistryCAs: map[string]string{"..": testCA(t)}}, "is not a registry host"},
		{"a CA key with two ports", Inputs{RegistryCAs: map[string]string{"r.example.com..5000..6000": testCA(t)}}, "is not a registry host"},
		{"a CA that is not PEM", Inputs{RegistryCAs: map[string]string{"r.example.com": "hello"}}, `key "r.example.com": holds text that is not PEM`},
		{"a private key in a CA bundle", Inputs{RegistryCAs: map[string]string{"r.example.com": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}}, `"PRIVATE KEY" PEM block`},
		{"a trusted CA that does not parse", Inputs{TrustedCA: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}, "trusted CA ConfigMap's ca-bundle.crt: a certificate does not parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestRegistryCAs(t *testing.T) {
	ca := testCA(t)
	gen, err := Build(Inputs{RegistryCAs: map[string]string{"r.example.com..5000": ca, "q.example.com": ca}, TrustedCA: ca})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(gen.RegistryCAs); got != 2 || gen.RegistryCAs["r.example.com:5000"] == nil || gen.RegistryCAs["q.example.com"] == nil {
		t.Fatalf("RegistryCAs keys = %v; want r.example.com:5000 and q.example.com", gen.RegistryCAs)
	}
	set, err := NewStore(t.TempDir()).Update(gen)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.PrepareHosts("other.example.com"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"r.example.com:5000/registry-ca.crt", "r.example.com:5000/trusted-ca.crt", "other.example.com/trusted-ca.crt"} {
		if _, err := readFile(set.CertDir, f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := readFile(set.CertDir, "other.example.com/registry-ca.crt"); err == nil {
		t.Errorf("other.example.com has a registry CA of its own")
	}
}
