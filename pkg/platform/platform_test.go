package platform

import (
	"maps"
	"slices"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    Platform
		wantErr string
	}{
		// Accepted, kept as written.
		{in: "linux/amd64", want: Platform{OS: "linux", Architecture: "amd64"}},
		{in: "linux/amd64/v1", want: Platform{OS: "linux", Architecture: "amd64", Variant: "v1"}},
		{in: "linux/amd64/v3", want: Platform{OS: "linux", Architecture: "amd64", Variant: "v3"}},
		{in: "linux/arm64", want: Platform{OS: "linux", Architecture: "arm64"}},
		{in: "linux/arm64/v8", want: Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}},
		{in: "linux/arm64/v8.0", want: Platform{OS: "linux", Architecture: "arm64", Variant: "v8.0"}},
		{in: "linux/arm64/v9.5", want: Platform{OS: "linux", Architecture: "arm64", Variant: "v9.5"}},
		{in: "linux/arm", want: Platform{OS: "linux", Architecture: "arm"}},
		{in: "linux/arm/v6", want: Platform{OS: "linux", Architecture: "arm", Variant: "v6"}},
		{in: "linux/arm/v7", want: Platform{OS: "linux", Architecture: "arm", Variant: "v7"}},
		{in: "linux/ppc64le", want: Platform{OS: "linux", Architecture: "ppc64le"}},
		{in: "linux/ppc64le/power9", want: Platform{OS: "linux", Architecture: "ppc64le", Variant: "power9"}},
		{in: "linux/s390x", want: Platform{OS: "linux", Architecture: "s390x"}},
		{in: "linux/386", want: Platform{OS: "linux", Architecture: "386"}},
		{in: "linux/riscv64/rva23u64", want: Platform{OS: "linux", Architecture: "riscv64", Variant: "rva23u64"}},
		{in: "linux/mips64le", want: Platform{OS: "linux", Architecture: "mips64le"}},
		{in: "linux/loong64", want: Platform{OS: "linux", Architecture: "loong64"}},
		{in: "windows/amd64", want: Platform{OS: "windows", Architecture: "amd64"}},
		{in: "wasip1/wasm", want: Platform{OS: "wasip1", Architecture: "wasm"}},

		// Shape: the API's CEL message.
		{in: "", wantErr: `"" is not os/arch or os/arch/variant (e.g. linux/arm64)`},
		{in: "linux", wantErr: `"linux" is not os/arch or os/arch/variant (e.g. linux/arm64)`},
		{in: "linux/", wantErr: `"linux/" is not os/arch or os/arch/variant (e.g. linux/arm64)`},
		{in: "/amd64", wantErr: `"/amd64" is not os/arch or os/arch/variant (e.g. linux/arm64)`},
		{in: "linux//v7", wantErr: `"linux//v7" is not os/arch or os/arch/variant (e.g. linux/arm64)`},
		{in: "linux/arm/", wantErr: `"linux/arm/" is not os/arch or os/arch/variant (e.g. linux/arm64)`},
		{in: "linux/arm/v7/x", wantErr: `"linux/arm/v7/x" is not os/arch or os/arch/variant (e.g. linux/arm64)`},
		{in: "   ", wantErr: `"   " is not os/arch or os/arch/variant (e.g. linux/arm64)`},

		// Spelling: say what to write.
		{in: " linux/amd64", wantErr: `" linux/amd64": remove the spaces ("linux/amd64")`},
		{in: "linux / arm64\n", wantErr: `"linux / arm64\n": remove the spaces ("linux/arm64")`},
		{in: "Linux/AMD64", wantErr: `"Linux/AMD64": use lowercase ("linux/amd64")`},
		{in: "linux/arm64/V8", wantErr: `"linux/arm64/V8": use lowercase ("linux/arm64/v8")`},

		// Aliases are not accepted, but named.
		{in: "linux/x86_64", wantErr: `"linux/x86_64": architecture "x86_64" is not a Go/OCI architecture name; use "amd64"`},
		{in: "linux/aarch64", wantErr: `"linux/aarch64": architecture "aarch64" is not a Go/OCI architecture name; use "arm64"`},
		{in: "linux/aarch64/v8", wantErr: `"linux/aarch64/v8": architecture "aarch64" is not a Go/OCI architecture name; use "arm64"`},
		{in: "linux/i686", wantErr: `"linux/i686": architecture "i686" is not a Go/OCI architecture name; use "386"`},
		{in: "linux/ppc64el", wantErr: `"linux/ppc64el": architecture "ppc64el" is not a Go/OCI architecture name; use "ppc64le"`},
		{in: "linux/armv7l", wantErr: `"linux/armv7l": architecture "armv7l" is not a Go/OCI architecture name; use "arm" with variant "v7" (linux/arm/v7)`},
		{in: "linux/armhf", wantErr: `"linux/armhf": architecture "armhf" is not a Go/OCI architecture name; use "arm" with variant "v7" (linux/arm/v7)`},

		// Unknown names.
		{in: "linx/amd64", wantErr: `"linx/amd64": os "linx" is not a Go/OCI os name; use one of linux, windows, aix, android, darwin, dragonfly, freebsd, illumos, ios, js, netbsd, openbsd, plan9, solaris, wasip1`},
		{in: "linux/amd46", wantErr: `"linux/amd46": architecture "amd46" is not a Go/OCI architecture name; use one of amd64, arm64, ppc64le, s390x, arm, 386, riscv64, mips64le, loong64, ppc64, mips, mipsle, mips64, wasm`},
		{in: "linux/arm\x00", wantErr: `"linux/arm\x00": architecture "arm\x00" is not a Go/OCI architecture name; use one of`},

		// Variants.
		{in: "linux/amd64/v5", wantErr: `"linux/amd64/v5": variant "v5" is not a variant of amd64; use one of v1, v2, v3, v4`},
		{in: "linux/amd64/3", wantErr: `"linux/amd64/3": variant "3" is not a variant of amd64; use "v3"`},
		{in: "linux/arm64/8", wantErr: `"linux/arm64/8": variant "8" is not a variant of arm64; use "v8"`},
		{in: "linux/arm/7", wantErr: `"linux/arm/7": variant "7" is not a variant of arm; use "v7"`},
		{in: "linux/arm/v9", wantErr: `"linux/arm/v9": variant "v9" is not a variant of arm; use one of v5, v6, v7, v8`},
		{in: "linux/arm64/v9.6", wantErr: `"linux/arm64/v9.6": variant "v9.6" is not a variant of arm64; use one of v8, v8.0, v8.1`},
		{in: "linux/s390x/v1", wantErr: `"linux/s390x/v1": architecture "s390x" has no variants; use "linux/s390x"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) = %v, %v; want error %s", tt.in, got, err, tt.wantErr)
				}
				if got != (Platform{}) {
					t.Errorf("Parse(%q) returned %v with its error; want the zero Platform", tt.in, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Parse(%q) = %#v, %v; want %#v", tt.in, got, err, tt.want)
			}
			if s := got.String(); s != tt.in {
				t.Errorf("Parse(%q).String() = %q; want the input back", tt.in, s)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"linux/amd64", "linux/amd64"},
		{"linux/amd64/v1", "linux/amd64"},
		{"linux/amd64/v2", "linux/amd64/v2"},
		{"linux/arm64", "linux/arm64"},
		{"linux/arm64/v8", "linux/arm64"},
		{"linux/arm64/v8.0", "linux/arm64"},
		{"linux/arm64/v8.2", "linux/arm64/v8.2"},
		{"linux/arm64/v9", "linux/arm64/v9"},
		{"linux/arm64/v9.0", "linux/arm64/v9"},
		{"linux/arm", "linux/arm/v7"},
		{"linux/arm/v7", "linux/arm/v7"},
		{"linux/arm/v6", "linux/arm/v6"},
		{"linux/ppc64le/power8", "linux/ppc64le"},
		{"linux/ppc64le/power10", "linux/ppc64le/power10"},
		{"linux/riscv64/rva20u64", "linux/riscv64"},
		{"linux/s390x", "linux/s390x"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got := p.Normalize()
			if got.String() != tt.want {
				t.Errorf("Normalize(%q) = %q; want %q", tt.in, got, tt.want)
			}
			if again := got.Normalize(); again != got {
				t.Errorf("Normalize is not idempotent: %q -> %q -> %q", tt.in, got, again)
			}
			if p.Key() != tt.want {
				t.Errorf("Key(%q) = %q; want %q", tt.in, p.Key(), tt.want)
			}
		})
	}
}

func TestNormalizeUnchecked(t *testing.T) {
	// Platforms from image configs are not checked: Normalize must leave what it does not know
	// alone, and still be idempotent.
	tests := []struct {
		in, want Platform
	}{
		{Platform{OS: "linux", Architecture: "x86_64"}, Platform{OS: "linux", Architecture: "x86_64"}},
		{Platform{OS: "linux", Architecture: "arm64", Variant: "v8.0.0"}, Platform{OS: "linux", Architecture: "arm64", Variant: "v8.0.0"}},
		{Platform{OS: "linux", Architecture: "arm64", Variant: "v10.0"}, Platform{OS: "linux", Architecture: "arm64", Variant: "v10.0"}},
		{Platform{Architecture: "arm"}, Platform{Architecture: "arm", Variant: "v7"}},
		{Platform{}, Platform{}},
	}
	for _, tt := range tests {
		if got := tt.in.Normalize(); got != tt.want || got.Normalize() != got {
			t.Errorf("%#v.Normalize() = %#v; want %#v", tt.in, got, tt.want)
		}
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"linux/arm64", "linux/arm64/v8", true},
		{"linux/arm64/v8.0", "linux/arm64/v8", true},
		{"linux/arm", "linux/arm/v7", true},
		{"linux/amd64", "linux/amd64/v1", true},
		{"linux/amd64", "linux/amd64", true},
		{"linux/arm64", "linux/arm64/v8.2", false},
		{"linux/arm", "linux/arm/v6", false},
		{"linux/amd64", "linux/amd64/v2", false},
		{"linux/amd64", "linux/arm64", false},
		{"linux/amd64", "windows/amd64", false},
		{"linux/ppc64le", "linux/ppc64", false},
	}
	for _, tt := range tests {
		a, b := mustParse(t, tt.a), mustParse(t, tt.b)
		if got := a.Equal(b); got != tt.want {
			t.Errorf("%q.Equal(%q) = %v; want %v", tt.a, tt.b, got, tt.want)
		}
		if got := b.Equal(a); got != tt.want {
			t.Errorf("%q.Equal(%q) = %v; want %v", tt.b, tt.a, got, tt.want)
		}
		if got := a.Key() == b.Key(); got != tt.want {
			t.Errorf("Key(%q) == Key(%q) is %v; want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		in   Platform
		want string
	}{
		{Platform{}, ""},
		{Platform{OS: "linux", Architecture: "amd64"}, "linux/amd64"},
		{Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}, "linux/arm64/v8"},
		{Platform{Architecture: "amd64"}, "/amd64"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("%#v.String() = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseList(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr []string
	}{
		{name: "empty", in: nil, want: []string{}},
		{
			name: "order kept, spelling kept",
			in:   []string{"linux/s390x", "linux/arm64/v8", "linux/amd64", "linux/arm"},
			want: []string{"linux/s390x", "linux/arm64/v8", "linux/amd64", "linux/arm"},
		},
		{
			name:    "bad entry named by index",
			in:      []string{"linux/amd64", "linux/arm64", "linux"},
			wantErr: []string{`platforms[2]: "linux" is not os/arch or os/arch/variant (e.g. linux/arm64)`},
		},
		{
			name: "duplicate after normalization names both",
			in:   []string{"linux/amd64", "linux/arm64", "linux/arm64/v8"},
			wantErr: []string{
				`platforms[2]: "linux/arm64/v8" is the same platform as platforms[1] ("linux/arm64"); remove one of them`,
			},
		},
		{
			name: "every error reported",
			in:   []string{"linux/arm", "linux/x86_64", "linux/arm/v7", "linux/arm", "Linux/s390x"},
			wantErr: []string{
				`platforms[1]: "linux/x86_64": architecture "x86_64" is not a Go/OCI architecture name; use "amd64"`,
				`platforms[2]: "linux/arm/v7" is the same platform as platforms[0] ("linux/arm"); remove one of them`,
				`platforms[3]: "linux/arm" is the same platform as platforms[0] ("linux/arm"); remove one of them`,
				`platforms[4]: "Linux/s390x": use lowercase ("linux/s390x")`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseList(tt.in)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("ParseList(%q) = %v; want errors %q", tt.in, got, tt.wantErr)
				}
				if lines := strings.Split(err.Error(), "\n"); !slices.Equal(lines, tt.wantErr) {
					t.Errorf("ParseList(%q) errors:\n%s\nwant:\n%s", tt.in, err, strings.Join(tt.wantErr, "\n"))
				}
				if got != nil {
					t.Errorf("ParseList(%q) returned %v with its error; want nil", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseList(%q): %v", tt.in, err)
			}
			var strs []string
			for _, p := range got {
				strs = append(strs, p.String())
			}
			if !slices.Equal(strs, tt.want) {
				t.Errorf("ParseList(%q) = %q; want %q", tt.in, strs, tt.want)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	tests := []struct {
		name       string
		want, have Platform
		match      bool
	}{
		{"buildah's arm64 config", p("linux", "arm64", ""), p("linux", "arm64", "v8"), true},
		{"arm64/v8 asked, none recorded", p("linux", "arm64", "v8"), p("linux", "arm64", ""), true},
		{"arm64/v8.0 is v8", p("linux", "arm64", "v8.0"), p("linux", "arm64", "v8"), true},
		{"arm means v7", p("linux", "arm", ""), p("linux", "arm", "v7"), true},
		{"arm variant not recorded", p("linux", "arm", "v6"), p("linux", "arm", ""), true},
		{"amd64 level unknown to uname", p("linux", "amd64", "v3"), p("linux", "amd64", ""), true},
		{"amd64/v1 is amd64", p("linux", "amd64", ""), p("linux", "amd64", "v1"), true},
		{"needs a newer CPU than asked", p("linux", "amd64", ""), p("linux", "amd64", "v3"), false},
		{"other arm variant", p("linux", "arm", "v7"), p("linux", "arm", "v6"), false},
		{"other arm64 version", p("linux", "arm64", ""), p("linux", "arm64", "v9"), false},
		{"other architecture", p("linux", "amd64", ""), p("linux", "arm64", ""), false},
		{"other os", p("linux", "amd64", ""), p("windows", "amd64", ""), false},
		{"alias in a config is not amd64", p("linux", "amd64", ""), p("linux", "x86_64", ""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Matches(tt.want, tt.have); got != tt.match {
				t.Errorf("Matches(%q, %q) = %v; want %v", tt.want, tt.have, got, tt.match)
			}
		})
	}
}

func TestNameSuffix(t *testing.T) {
	tests := []struct {
		in   Platform
		want string
	}{
		{p("linux", "amd64", ""), "linux-amd64"},
		{p("linux", "amd64", "v1"), "linux-amd64"},
		{p("linux", "amd64", "v3"), "linux-amd64-v3"},
		{p("linux", "arm64", ""), "linux-arm64"},
		{p("linux", "arm64", "v8"), "linux-arm64"},
		{p("linux", "arm64", "v8.2"), "linux-arm64-v8-2"},
		{p("linux", "arm", ""), "linux-arm-v7"},
		{p("linux", "arm", "v7"), "linux-arm-v7"},
		{p("linux", "arm", "v6"), "linux-arm-v6"},
		{p("linux", "386", ""), "linux-386"},
		{p("linux", "ppc64le", "power8"), "linux-ppc64le"},
		// Unchecked input still gives a DNS label.
		{p("Linux", "x86_64", ""), "linux-x86-64"},
		{p("", "", ""), ""},
		{p("_", "ARM64", "-"), "arm64"},
		{p(strings.Repeat("a", 62), "b", "c"), strings.Repeat("a", 62)},
	}
	for _, tt := range tests {
		got := tt.in.NameSuffix()
		if got != tt.want {
			t.Errorf("%#v.NameSuffix() = %q; want %q", tt.in, got, tt.want)
		}
		if got != "" && !isDNSLabel(got) {
			t.Errorf("%#v.NameSuffix() = %q is not a DNS label", tt.in, got)
		}
	}
}

func TestOCI(t *testing.T) {
	o := ocispec.Platform{OS: "linux", Architecture: "arm64", Variant: "v8", OSVersion: "1", OSFeatures: []string{"f"}}
	got := FromOCI(o)
	if want := p("linux", "arm64", "v8"); got != want {
		t.Errorf("FromOCI(%+v) = %#v; want %#v", o, got, want)
	}
	back := got.OCI()
	if back.OS != "linux" || back.Architecture != "arm64" || back.Variant != "v8" || back.OSVersion != "" || back.OSFeatures != nil {
		t.Errorf("%#v.OCI() = %+v; want linux/arm64/v8 without OS version or features", got, back)
	}
	if n := p("linux", "arm", "").Normalize().OCI(); n.Variant != "v7" {
		t.Errorf("linux/arm normalized to OCI has variant %q; want v7", n.Variant)
	}
	if FromOCI(ocispec.Platform{}) != (Platform{}) {
		t.Errorf("FromOCI of the zero platform is not the zero Platform")
	}
}

func TestNodeLabels(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   Platform
		ok     bool
	}{
		{
			name:   "amd64 node",
			labels: map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "other": "x"},
			want:   p("linux", "amd64", ""),
			ok:     true,
		},
		{
			name:   "windows arm64 node",
			labels: map[string]string{"kubernetes.io/os": "windows", "kubernetes.io/arch": "arm64"},
			want:   p("windows", "arm64", ""),
			ok:     true,
		},
		{name: "no labels", labels: nil},
		{name: "no arch", labels: map[string]string{"kubernetes.io/os": "linux"}},
		{name: "no os", labels: map[string]string{"kubernetes.io/arch": "amd64"}},
		{name: "beta labels are not read", labels: map[string]string{"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}},
		{name: "alias", labels: map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "x86_64"}},
		{name: "variant smuggled in", labels: map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm/v7"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := FromNodeLabels(tt.labels)
			if got != tt.want || ok != tt.ok {
				t.Errorf("FromNodeLabels(%v) = %#v, %v; want %#v, %v", tt.labels, got, ok, tt.want, tt.ok)
			}
		})
	}

	for _, s := range []string{"linux/amd64", "linux/arm64/v8", "linux/arm/v7", "windows/amd64"} {
		pl := mustParse(t, s)
		sel := pl.NodeSelector()
		want := map[string]string{"kubernetes.io/os": pl.OS, "kubernetes.io/arch": pl.Architecture}
		if !maps.Equal(sel, want) {
			t.Errorf("%q.NodeSelector() = %v; want %v", s, sel, want)
		}
		back, ok := FromNodeLabels(sel)
		if !ok || !Matches(pl, back) {
			t.Errorf("FromNodeLabels(%q.NodeSelector()) = %q, %v; want a match for %q", s, back, ok, s)
		}
	}
}

func TestFromUname(t *testing.T) {
	tests := []struct {
		machine       string
		arch, variant string
		ok            bool
	}{
		{"x86_64", "amd64", "", true},
		{"x86_64\n", "amd64", "", true},
		{"aarch64", "arm64", "", true},
		{"arm64", "arm64", "", true},
		{"armv7l", "arm", "v7", true},
		{"armv6l", "arm", "v6", true},
		{"armv5tejl", "arm", "v5", true},
		{"armv8l", "arm", "v8", true},
		{"ppc64le", "ppc64le", "", true},
		{"ppc64", "ppc64", "", true},
		{"s390x", "s390x", "", true},
		{"riscv64", "riscv64", "", true},
		{"i686", "386", "", true},
		{"loongarch64", "loong64", "", true},
		{"mips64", "", "", false},
		{"mips", "", "", false},
		{"aarch64_be", "", "", false},
		{"armv7b", "", "", false},
		{"", "", "", false},
		{"X86_64", "", "", false},
	}
	for _, tt := range tests {
		arch, variant, ok := FromUname(tt.machine)
		if arch != tt.arch || variant != tt.variant || ok != tt.ok {
			t.Errorf("FromUname(%q) = %q, %q, %v; want %q, %q, %v", tt.machine, arch, variant, ok, tt.arch, tt.variant, tt.ok)
		}
	}

	// What a build pod reports from uname must match the platform it was asked to build.
	for _, tt := range []struct{ want, machine string }{
		{"linux/amd64", "x86_64"},
		{"linux/amd64/v3", "x86_64"},
		{"linux/arm64", "aarch64"},
		{"linux/arm64/v8", "aarch64"},
		{"linux/arm/v7", "armv7l"},
		{"linux/arm", "armv7l"},
		{"linux/s390x", "s390x"},
	} {
		arch, variant, _ := FromUname(tt.machine)
		if have := p("linux", arch, variant); !Matches(mustParse(t, tt.want), have) {
			t.Errorf("Matches(%q, FromUname(%q) = %q) = false; want true", tt.want, tt.machine, have)
		}
	}
	arch, variant, _ := FromUname("armv6l")
	if have := p("linux", arch, variant); Matches(mustParse(t, "linux/arm/v7"), have) {
		t.Errorf("Matches(linux/arm/v7, FromUname(armv6l) = %q) = true; want false", have)
	}
}

func TestKnownArchitectures(t *testing.T) {
	got := KnownArchitectures()
	for _, a := range []string{"amd64", "arm64", "ppc64le", "s390x", "arm", "386", "riscv64", "mips64le", "loong64"} {
		if !slices.Contains(got, a) {
			t.Errorf("KnownArchitectures() = %q lacks %q", got, a)
		}
		if _, err := Parse("linux/" + a); err != nil {
			t.Errorf("Parse(linux/%s): %v", a, err)
		}
	}
	// Every alias points at a platform Parse accepts, and is not itself a Go name.
	for name, a := range aliases {
		if slices.Contains(got, name) {
			t.Errorf("alias %q is a Go architecture name", name)
		}
		if _, err := Parse(p("linux", a.arch, a.variant).String()); err != nil {
			t.Errorf("alias %q points at an invalid platform: %v", name, err)
		}
	}
	got[0] = "changed"
	if KnownArchitectures()[0] != "amd64" {
		t.Errorf("changing the returned slice changed the package's list")
	}
}

func p(os, arch, variant string) Platform {
	return Platform{OS: os, Architecture: arch, Variant: variant}
}

func mustParse(t *testing.T, s string) Platform {
	t.Helper()
	pl, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// isDNSLabel reports whether s is an RFC 1123 label, as Kubernetes checks names.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
