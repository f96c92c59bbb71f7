package manifestlist_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/manifest"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/manifestlist"
	"github.com/archway-build/archway/pkg/registry"
	"github.com/archway-build/archway/test/bed"
)

// insecure reaches the bed's plain-HTTP registries.
var insecure = registry.Access{InsecureRegistries: []string{registry.AllRegistries}}

// wantPlatforms are the platforms the index of fourPlatforms lists, in
// order: the base image records arm64 with variant v8.
var wantPlatforms = []string{"linux/amd64", "linux/arm64/v8", "linux/ppc64le", "linux/s390x"}

func indexPlatforms(index ocispec.Index) []string {
	var out []string
	for _, d := range index.Manifests {
		p := d.Platform.OS + "/" + d.Platform.Architecture
		if d.Platform.Variant != "" {
			p += "/" + d.Platform.Variant
		}
		out = append(out, p)
	}
	return out
}

func tagsOf(t testing.TB, reg *bed.Registry, repo string) []string {
	t.Helper()
	tags, err := reg.Tags(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(tags)
	return tags
}

// TestAssembleAndUntag pushes four platforms' images, assembles their
// index, and untags them: the index lists the four with the right
// platforms, the per-platform tags are gone, and the index and every image
// can still be pulled by digest.
func TestAssembleAndUntag(t *testing.T) {
	ctx := context.Background()
	reg := theBed.Registry
	repo := repoName(t)
	output := reg.Host + "/" + repo + ":v1"
	digests := pushPlatforms(t, reg, output, fourPlatforms, pushOptions{})

	res, err := manifestlist.Assemble(ctx, manifestlist.Options{Output: output, Entries: entries(digests, fourPlatforms), Access: insecure})
	if err != nil {
		t.Fatalf("Assemble: %v", err)
	}
	index, mediaType, got := readIndex(t, reg, output)
	if got != res.Digest {
		t.Errorf("the registry's %s is %s, Assemble said %s", output, got, res.Digest)
	}
	if mediaType != ocispec.MediaTypeImageIndex || res.MediaType != mediaType {
		t.Errorf("media type %s (Assemble said %s), want an OCI index", mediaType, res.MediaType)
	}
	if got := indexPlatforms(index); !slices.Equal(got, wantPlatforms) {
		t.Errorf("index platforms %v, want %v", got, wantPlatforms)
	}
	for i, d := range index.Manifests {
		p := fourPlatforms[i]
		if d.Digest != digests[p] || d.MediaType != ocispec.MediaTypeImageManifest || d.Size == 0 {
			t.Errorf("entry %d = %+v, want %s's image %s", i, d, p, digests[p])
		}
	}
	if res.Reference != reg.Host+"/"+repo+"@"+res.Digest.String() {
		t.Errorf("Reference = %s", res.Reference)
	}

	// Pushing again gives the same digest: the list is deterministic.
	reversed := slices.Clone(fourPlatforms)
	slices.Reverse(reversed)
	again, err := manifestlist.Assemble(ctx, manifestlist.Options{Output: output, Entries: entries(digests, reversed), Access: insecure})
	if err != nil || again.Digest != res.Digest {
		t.Errorf("second Assemble = %v, %v; want the same digest %s", again, err, res.Digest)
	}

	tags := platformTags(t, output, fourPlatforms)
	if got := tagsOf(t, reg, repo); len(got) != 5 {
		t.Fatalf("before untagging, tags %v", got)
	}
	if err := manifestlist.Untag(ctx, insecure, tags...); err != nil {
		t.Fatalf("Untag: %v", err)
	}
	if got := tagsOf(t, reg, repo); !slices.Equal(got, []string{"v1"}) {
		t.Errorf("after untagging, tags %v; want only v1", got)
	}
	pullAll(t, reg, res.Reference)
	for _, p := range fourPlatforms {
		pullAll(t, reg, reg.Host+"/"+repo+"@"+digests[p].String())
	}
	// Untagging again finds nothing to do and says nothing is wrong.
	if err := manifestlist.Untag(ctx, insecure, tags...); err != nil {
		t.Errorf("second Untag: %v", err)
	}
}

// TestAssembleDockerSchema2 lists Docker schema 2 images in a Docker
// manifest list.
func TestAssembleDockerSchema2(t *testing.T) {
	reg := theBed.Registry
	output := reg.Host + "/" + repoName(t) + ":v1"
	digests := pushPlatforms(t, reg, output, fourPlatforms, pushOptions{dockerSchema2: true})
	res, err := manifestlist.Assemble(context.Background(), manifestlist.Options{Output: output, Entries: entries(digests, fourPlatforms), Access: insecure})
	if err != nil {
		t.Fatalf("Assemble: %v", err)
	}
	index, mediaType, got := readIndex(t, reg, output)
	if mediaType != manifest.DockerV2ListMediaType || got != res.Digest {
		t.Fatalf("%s is %s %s; want a Docker manifest list %s", output, mediaType, got, res.Digest)
	}
	if got := indexPlatforms(index); !slices.Equal(got, wantPlatforms) {
		t.Errorf("list platforms %v, want %v", got, wantPlatforms)
	}
	for _, d := range index.Manifests {
		if d.MediaType != manifest.DockerV2Schema2MediaType {
			t.Errorf("entry %s has media type %s", d.Digest, d.MediaType)
		}
	}
	pullAll(t, reg, res.Reference)
}

// TestAssembleSkew: a digest the repository does not hold and an image
// whose config is for another platform both fail with PlatformVersionSkew
// naming the platform, and push nothing.
func TestAssembleSkew(t *testing.T) {
	ctx := context.Background()
	reg := theBed.Registry
	repo := repoName(t)
	output := reg.Host + "/" + repo + ":v1"
	// ppc64le's tag holds the arm64 image: a builder that built for its own
	// node.
	digests := pushPlatforms(t, reg, output, fourPlatforms, pushOptions{as: map[string]string{"linux/ppc64le": "linux/arm64"}})

	t.Run("config for another platform", func(t *testing.T) {
		_, err := manifestlist.Assemble(ctx, manifestlist.Options{Output: output, Entries: entries(digests, fourPlatforms), Access: insecure})
		checkSkew(t, err, "linux/ppc64le", "its image config")
	})
	t.Run("digest not in the repository", func(t *testing.T) {
		es := entries(digests, []string{"linux/amd64", "linux/s390x"})
		es[1].Digest = digest.FromString("never pushed")
		_, err := manifestlist.Assemble(ctx, manifestlist.Options{Output: output, Entries: es, Access: insecure})
		checkSkew(t, err, "linux/s390x", "does not hold")
	})
	t.Run("complete without a digest", func(t *testing.T) {
		_, err := manifestlist.Entries([]buildv1.BuildStatusPlatform{
			{Platform: "linux/amd64", Phase: buildv1.BuildPhaseComplete, Output: &buildv1.BuildStatusPlatformOutput{ImageDigest: digests["linux/amd64"].String()}},
			{Platform: "linux/arm64", Phase: buildv1.BuildPhaseComplete},
		})
		checkSkew(t, err, "linux/arm64", "recorded no image digest")
	})
	if got := tagsOf(t, reg, repo); slices.Contains(got, "v1") {
		t.Errorf("a manifest list was pushed despite the skew: tags %v", got)
	}
}

func checkSkew(t *testing.T, err error, platform, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want PlatformVersionSkew for %s", platform)
	}
	var e *manifestlist.Error
	if manifestlist.ReasonOf(err) != buildv1.StatusReasonPlatformVersionSkew || !errorsAs(err, &e) || e.Platform != platform ||
		!strings.Contains(err.Error(), platform) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q (reason %s); want PlatformVersionSkew naming %s and saying %q", err, manifestlist.ReasonOf(err), platform, want)
	}
}

// TestAllowedToFail: with s390x failed and allowed to fail, the list has
// the other three; without the allowance there is no list.
func TestAllowedToFail(t *testing.T) {
	ctx := context.Background()
	reg := theBed.Registry
	repo := repoName(t)
	output := reg.Host + "/" + repo + ":v1"
	three := fourPlatforms[:3]
	digests := pushPlatforms(t, reg, output, three, pushOptions{})
	var statuses []buildv1.BuildStatusPlatform
	for _, p := range three {
		statuses = append(statuses, buildv1.BuildStatusPlatform{Platform: p, Phase: buildv1.BuildPhaseComplete,
			Output: &buildv1.BuildStatusPlatformOutput{ImageDigest: digests[p].String()}})
	}
	statuses = append(statuses, buildv1.BuildStatusPlatform{Platform: "linux/s390x", Phase: buildv1.BuildPhaseFailed,
		Reason: buildv1.StatusReasonDockerBuildFailed, Message: "RUN false: exit status 1"})

	if _, err := manifestlist.Select(statuses, nil); manifestlist.ReasonOf(err) != buildv1.StatusReasonPlatformBuildFailed ||
		!strings.Contains(err.Error(), "linux/s390x") {
		t.Fatalf("Select without allowance = %v; want PlatformBuildFailed naming linux/s390x", err)
	}
	sel, err := manifestlist.Select(statuses, []string{"linux/s390x"})
	if err != nil {
		t.Fatal(err)
	}
	es, err := manifestlist.Entries(sel.Included)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := manifestlist.Assemble(ctx, manifestlist.Options{Output: output, Entries: es, Access: insecure}); err != nil {
		t.Fatalf("Assemble: %v", err)
	}
	index, _, _ := readIndex(t, reg, output)
	if got := indexPlatforms(index); !slices.Equal(got, wantPlatforms[:3]) {
		t.Errorf("index platforms %v, want %v", got, wantPlatforms[:3])
	}
}

// TestAuthRegistry assembles and untags on the htpasswd registry with the
// right credentials, and fails clearly with wrong ones.
func TestAuthRegistry(t *testing.T) {
	ctx := context.Background()
	reg := theBed.AuthRegistry
	repo := repoName(t)
	output := reg.Host + "/" + repo + ":v1"
	digests := pushPlatforms(t, reg, output, fourPlatforms, pushOptions{})
	tags := platformTags(t, output, fourPlatforms)

	good, err := reg.AuthFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "config.json")
	data, _ := json.Marshal(map[string]any{"auths": map[string]any{reg.Host: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(reg.Username + ":wrong-password")),
	}}})
	if err := os.WriteFile(bad, data, 0o600); err != nil {
		t.Fatal(err)
	}
	wrong := registry.Access{AuthFile: registry.AuthFile{Path: bad}, InsecureRegistries: []string{registry.AllRegistries}}
	right := registry.Access{AuthFile: registry.AuthFile{Path: good}, InsecureRegistries: []string{registry.AllRegistries}}

	_, err = manifestlist.Assemble(ctx, manifestlist.Options{Output: output, Entries: entries(digests, fourPlatforms), Access: wrong})
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "authentication required") {
		t.Errorf("Assemble with wrong credentials = %v; want an authentication error naming %s", err, bad)
	}
	if err := manifestlist.Untag(ctx, wrong, tags...); err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Errorf("Untag with wrong credentials = %v; want the credentials refused", err)
	}
	if err := manifestlist.Untag(ctx, insecure, tags[0]); err == nil || !strings.Contains(err.Error(), "requires credentials") {
		t.Errorf("Untag without credentials = %v; want credentials required", err)
	}
	if got := tagsOf(t, reg, repo); len(got) != 4 {
		t.Fatalf("tags %v: a failed call changed the registry", got)
	}

	res, err := manifestlist.Assemble(ctx, manifestlist.Options{Output: output, Entries: entries(digests, fourPlatforms), Access: right})
	if err != nil {
		t.Fatalf("Assemble with the right credentials: %v", err)
	}
	if err := manifestlist.Untag(ctx, right, tags...); err != nil {
		t.Fatalf("Untag with the right credentials: %v", err)
	}
	if got := tagsOf(t, reg, repo); !slices.Equal(got, []string{"v1"}) {
		t.Errorf("after untagging, tags %v; want only v1", got)
	}
	pullAll(t, reg, res.Reference)
}
