package registries

import (
	"errors"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/google/go-cmp/cmp"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1alpha1 "github.com/openshift/api/operator/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/archway-build/archway/pkg/registry"
)

func icsp(name string, mirrors ...operatorv1alpha1.RepositoryDigestMirrors) operatorv1alpha1.ImageContentSourcePolicy {
	return operatorv1alpha1.ImageContentSourcePolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: operatorv1alpha1.ImageContentSourcePolicySpec{RepositoryDigestMirrors: mirrors}}
}

func imageConfig(src configv1.RegistrySources) *configv1.Image {
	return &configv1.Image{ObjectMeta: metav1.ObjectMeta{Name: ImageConfigName}, Spec: configv1.ImageSpec{RegistrySources: src}}
}

// tried is what a node tries for ref under in: the references in order,
// "blocked" last when the source is blocked.
func tried(t *testing.T, in Inputs, ref string) []string {
	t.Helper()
	gen, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewStore(t.TempDir()).Update(gen)
	if err != nil {
		t.Fatal(err)
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := set.Registry(named.Name())
	if err != nil {
		t.Fatal(err)
	}
	if reg == nil {
		return []string{named.String()}
	}
	sources, err := reg.PullSourcesFromReference(named)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range sources {
		got = append(got, s.Reference.String())
	}
	if reg.Blocked {
		got = append(got, "blocked")
	}
	return got
}

// TestOpenShiftSourcesResolve: ImageContentSourcePolicies and the image
// config's registry sources, by what a node would try.
func TestOpenShiftSourcesResolve(t *testing.T) {
	tests := []struct {
		name string
		in   Inputs
		ref  string
		want []string
	}{
		{name: "an ICSP mirror serves a digest, then the source",
			in:   Inputs{ContentSourcePolicies: []operatorv1alpha1.ImageContentSourcePolicy{icsp("a", operatorv1alpha1.RepositoryDigestMirrors{Source: "quay.io/team", Mirrors: []string{"mirror.example.com/team"}})}},
			ref:  "quay.io/team/app" + digestRef,
			want: []string{"mirror.example.com/team/app" + digestRef, "quay.io/team/app" + digestRef}},
		{name: "an ICSP mirror does not serve a tag",
			in:   Inputs{ContentSourcePolicies: []operatorv1alpha1.ImageContentSourcePolicy{icsp("a", operatorv1alpha1.RepositoryDigestMirrors{Source: "quay.io/team", Mirrors: []string{"mirror.example.com/team"}})}},
			ref:  "quay.io/team/app:v1",
			want: []string{"quay.io/team/app:v1"}},
		{name: "ICSPs merge after the digest mirror sets, in name order",
			in: Inputs{
				DigestMirrorSets: []configv1.ImageDigestMirrorSet{idms("z", configv1.ImageDigestMirrors{Source: "quay.io", Mirrors: []configv1.ImageMirror{"idms.example.com"}})},
				ContentSourcePolicies: []operatorv1alpha1.ImageContentSourcePolicy{
					icsp("b", operatorv1alpha1.RepositoryDigestMirrors{Source: "quay.io", Mirrors: []string{"b.example.com"}}),
					icsp("a", operatorv1alpha1.RepositoryDigestMirrors{Source: "quay.io", Mirrors: []string{"a.example.com", "b.example.com"}}),
				}},
			ref:  "quay.io/app" + digestRef,
			want: []string{"idms.example.com/app" + digestRef, "a.example.com/app" + digestRef, "b.example.com/app" + digestRef, "quay.io/app" + digestRef}},
		{name: "a blocked registry of the image config",
			in:   Inputs{ImageConfig: imageConfig(configv1.RegistrySources{BlockedRegistries: []string{"evil.example.com"}})},
			ref:  "evil.example.com/team/app:v1",
			want: []string{"evil.example.com/team/app:v1", "blocked"}},
		{name: "a blocked wildcard",
			in:   Inputs{ImageConfig: imageConfig(configv1.RegistrySources{BlockedRegistries: []string{"*.evil.example.com"}})},
			ref:  "r.evil.example.com/app:v1",
			want: []string{"r.evil.example.com/app:v1", "blocked"}},
		{name: "a blocked registry keeps its ICSP mirrors for digests",
			in: Inputs{
				ImageConfig:           imageConfig(configv1.RegistrySources{BlockedRegistries: []string{"evil.example.com"}}),
				ContentSourcePolicies: []operatorv1alpha1.ImageContentSourcePolicy{icsp("a", operatorv1alpha1.RepositoryDigestMirrors{Source: "evil.example.com/team", Mirrors: []string{"good.example.com/team"}})},
			},
			ref:  "evil.example.com/team/app" + digestRef,
			want: []string{"good.example.com/team/app" + digestRef, "evil.example.com/team/app" + digestRef, "blocked"}},
		{name: "a registry outside allowedRegistries is blocked, its mirrors unused",
			in: Inputs{
				ImageConfig:           imageConfig(configv1.RegistrySources{AllowedRegistries: []string{"quay.io/team", "*.example.com"}}),
				ContentSourcePolicies: []operatorv1alpha1.ImageContentSourcePolicy{icsp("a", operatorv1alpha1.RepositoryDigestMirrors{Source: "docker.io", Mirrors: []string{"mirror.example.com"}})},
			},
			ref:  "docker.io/library/busybox" + digestRef,
			want: []string{"docker.io/library/busybox" + digestRef, "blocked"}},
		{name: "a repository within an allowed scope",
			in:   Inputs{ImageConfig: imageConfig(configv1.RegistrySources{AllowedRegistries: []string{"quay.io/team"}})},
			ref:  "quay.io/team/app:v1",
			want: []string{"quay.io/team/app:v1"}},
		{name: "a sibling of an allowed repository is not allowed",
			in:   Inputs{ImageConfig: imageConfig(configv1.RegistrySources{AllowedRegistries: []string{"quay.io/team"}})},
			ref:  "quay.io/teamster/app:v1",
			want: []string{"quay.io/teamster/app:v1", "blocked"}},
		{name: "an allowed wildcard matches the host without its port",
			in:   Inputs{ImageConfig: imageConfig(configv1.RegistrySources{AllowedRegistries: []string{"*.example.com"}})},
			ref:  "r.example.com:5000/app:v1",
			want: []string{"r.example.com:5000/app:v1"}},
		{name: "an insecure registry of the image config",
			in:   Inputs{ImageConfig: imageConfig(configv1.RegistrySources{InsecureRegistries: []string{"plain.example.com:5000"}})},
			ref:  "plain.example.com:5000/app:v1",
			want: []string{"plain.example.com:5000/app:v1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tried(t, tt.in, tt.ref)); diff != "" {
				t.Errorf("endpoints tried (-want +got):\n%s", diff)
			}
		})
	}
}

func TestImageConfigInsecure(t *testing.T) {
	gen, err := Build(Inputs{ImageConfig: imageConfig(configv1.RegistrySources{InsecureRegistries: []string{"plain.example.com:5000", "*.lab.example.com"}})})
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewStore(t.TempDir()).Update(gen)
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range []string{"plain.example.com:5000/app", "r.lab.example.com/app"} {
		if reg, err := set.Registry(repo); err != nil || reg == nil || !reg.Insecure {
			t.Errorf("%s: %+v, %v; want an insecure entry", repo, reg, err)
		}
	}
	if reg, _ := set.Registry("plain.example.com/app"); reg != nil && reg.Insecure {
		t.Errorf("plain.example.com (another port) is insecure")
	}
}

func TestSettingsCheckBlockedNotAllowed(t *testing.T) {
	gen, err := Build(Inputs{ImageConfig: imageConfig(configv1.RegistrySources{AllowedRegistries: []string{"quay.io"}})})
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewStore(t.TempDir()).Update(gen)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.CheckBlocked("quay.io/team/app:1", false); err != nil {
		t.Errorf("quay.io: %v, want allowed", err)
	}
	for _, push := range []bool{false, true} {
		err := set.CheckBlocked("ghcr.io/team/app:1", push)
		var blocked *registry.BlockedError
		if !errors.As(err, &blocked) || !blocked.NotAllowed || !strings.Contains(err.Error(), "allowedRegistries") {
			t.Errorf("ghcr.io (push %v): %v, want a BlockedError naming allowedRegistries", push, err)
		}
	}
}

func TestOpenShiftTrust(t *testing.T) {
	ca1, ca2, svc := testCA(t), testCA(t), testCA(t)
	img := imageConfig(configv1.RegistrySources{})
	img.Status.InternalRegistryHostname = "image-registry.openshift-image-registry.svc:5000"
	gen, err := Build(Inputs{
		RegistryCAs:          map[string]string{"r.example.com": ca1},
		AdditionalTrustedCAs: map[string]string{"r.example.com": ca2, "other.example.com..5000": ca2},
		ImageConfig:          img,
		ServiceCA:            svc,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"r.example.com":          ca1 + ca2,
		"other.example.com:5000": ca2,
		"image-registry.openshift-image-registry.svc:5000": svc,
	}
	got := map[string]string{}
	for host, b := range gen.RegistryCAs {
		got[host] = string(b)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("registry CAs (-want +got):\n%s", diff)
	}
	// Without the image config's internal registry, the service CA
	// trusts nothing.
	gen, err = Build(Inputs{ServiceCA: svc, ImageConfig: imageConfig(configv1.RegistrySources{})})
	if err != nil || len(gen.RegistryCAs) != 0 {
		t.Errorf("service CA without an internal registry: %v, %v; want no CA", gen.RegistryCAs, err)
	}
}

func TestOpenShiftSourcesRefused(t *testing.T) {
	img := imageConfig(configv1.RegistrySources{})
	img.Status.InternalRegistryHostname = "image-registry.openshift-image-registry.svc:5000"
	tests := []struct {
		name, source, want string
		in                 Inputs
	}{
		{"allowed and blocked", imageConfigSource, "both allowedRegistries and blockedRegistries",
			Inputs{ImageConfig: imageConfig(configv1.RegistrySources{AllowedRegistries: []string{"quay.io"}, BlockedRegistries: []string{"ghcr.io"}})}},
		{"a blocked scope with a tag", imageConfigSource, `blockedRegistries[0] "quay.io/app:1"`,
			Inputs{ImageConfig: imageConfig(configv1.RegistrySources{BlockedRegistries: []string{"quay.io/app:1"}})}},
		{"an allowed scope with a digest", imageConfigSource, "allowedRegistries[1]",
			Inputs{ImageConfig: imageConfig(configv1.RegistrySources{AllowedRegistries: []string{"quay.io", "quay.io/app" + digestRef}})}},
		{"an uppercase path", imageConfigSource, "blockedRegistries[0]",
			Inputs{ImageConfig: imageConfig(configv1.RegistrySources{BlockedRegistries: []string{"quay.io/Team"}})}},
		{"a bad wildcard", imageConfigSource, "insecureRegistries[0]",
			Inputs{ImageConfig: imageConfig(configv1.RegistrySources{InsecureRegistries: []string{"*.example.com:5000"}})}},
		{"an additionalTrustedCA key with a path", additionalCASource, "is not a registry host",
			Inputs{AdditionalTrustedCAs: map[string]string{"r.example.com/team": testCA(t)}}},
		{"an additionalTrustedCA value without a certificate", additionalCASource, "holds text that is not PEM",
			Inputs{AdditionalTrustedCAs: map[string]string{"r.example.com": "not a certificate"}}},
		{"an ICSP source with a tag", contentSourcePolicySource + "bad", `ImageContentSourcePolicy bad: spec.repositoryDigestMirrors[0].source "quay.io/app:1"`,
			Inputs{ContentSourcePolicies: []operatorv1alpha1.ImageContentSourcePolicy{
				icsp("good", operatorv1alpha1.RepositoryDigestMirrors{Source: "quay.io/team", Mirrors: []string{"m.example.com/team"}}),
				icsp("bad", operatorv1alpha1.RepositoryDigestMirrors{Source: "quay.io/app:1", Mirrors: []string{"m.example.com/app"}}),
			}}},
		{"an ICSP mirror that is empty", contentSourcePolicySource + "empty", "mirrors[0] \"\"",
			Inputs{ContentSourcePolicies: []operatorv1alpha1.ImageContentSourcePolicy{
				icsp("empty", operatorv1alpha1.RepositoryDigestMirrors{Source: "quay.io/team", Mirrors: []string{""}}),
			}}},
		{"a service CA without a certificate", serviceCASource, "holds text that is not PEM",
			Inputs{ImageConfig: img, ServiceCA: "garbage"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(tt.in)
			var inErr *InputError
			if !errors.As(err, &inErr) || inErr.Source != tt.source || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Build: %v; want an InputError from %q saying %q", err, tt.source, tt.want)
			}
		})
	}
}
