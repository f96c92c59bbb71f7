package bed

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"testing"

	"github.com/docker/distribution/registry/api/errcode"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/oci/layout"
	"go.podman.io/image/v5/types"
)

// testRegistry starts a registry in a temporary directory for one test.
func testRegistry(t *testing.T, ctx context.Context, name string, auth bool) *Registry {
	t.Helper()
	r, err := startRegistry(ctx, t.TempDir(), name, auth, RegistryOptions{})
	if err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(r.proc.Stop)
	return r
}

// dockerRef parses "host/repo:tag" or "host/repo@digest" for containers/image.
func dockerRef(t *testing.T, ref string) types.ImageReference {
	t.Helper()
	r, err := docker.ParseReference("//" + ref)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// unauthorized reports whether err is the registry refusing credentials,
// in either of the ways containers/image reports a 401. The errcode type is
// the archived docker/distribution one because containers/image returns it
// (see isNotFound in pkg/manifestlist).
func unauthorized(err error) bool {
	var forCredentials docker.ErrUnauthorizedForCredentials
	var registryErr errcode.Error
	return errors.As(err, &forCredentials) ||
		errors.As(err, &registryErr) && registryErr.Code == errcode.ErrorCodeUnauthorized
}

// TestRegistryAuth pushes the base image into the auth registry and pulls
// it back with its credentials, and checks that wrong or missing
// credentials are refused for pulls, pushes and the API.
func TestRegistryAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), CaseTimeout)
	defer cancel()
	plain := testRegistry(t, ctx, "registry", false)
	auth := testRegistry(t, ctx, "auth-registry", true)
	if auth.Username == "" || auth.Password == "" {
		t.Fatalf("auth registry has no credentials: %+v", auth)
	}
	base, err := SeedBaseImage(ctx, plain)
	if err != nil {
		t.Fatal(err)
	}

	pushed := auth.Host + "/pushed/busybox:v1"
	copied, err := copyImage(ctx, dockerRef(t, pushed), dockerRef(t, base), auth.SystemContext(), plain.SystemContext())
	if err != nil {
		t.Fatalf("pushing to the auth registry with its credentials: %v", err)
	}
	want, err := manifest.Digest(copied)
	if err != nil {
		t.Fatal(err)
	}
	if tags, err := auth.Tags(ctx, "pushed/busybox"); err != nil || !slices.Equal(tags, []string{"v1"}) {
		t.Errorf("tags of pushed/busybox = %q, %v; want [v1]", tags, err)
	}

	pull := func(sys *types.SystemContext) error {
		dest, err := layout.NewReference(t.TempDir(), "pulled")
		if err != nil {
			t.Fatal(err)
		}
		got, err := copyImage(ctx, dest, dockerRef(t, pushed), nil, sys)
		if err != nil {
			return err
		}
		if d, _ := manifest.Digest(got); d != want {
			t.Errorf("pulled %s, pushed %s", d, want)
		}
		return nil
	}
	if err := pull(auth.SystemContext()); err != nil {
		t.Errorf("pulling with the registry's credentials: %v", err)
	}
	authFile, err := auth.AuthFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := pull(&types.SystemContext{AuthFilePath: authFile, DockerInsecureSkipTLSVerify: types.OptionalBoolTrue}); err != nil {
		t.Errorf("pulling with the credentials of AuthFile: %v", err)
	}
	if _, err := plain.AuthFile(t.TempDir()); err == nil {
		t.Error("AuthFile of a registry without auth succeeded")
	}

	wrong := auth.SystemContext()
	wrong.DockerAuthConfig = &types.DockerAuthConfig{Username: auth.Username, Password: "wrong"}
	if err := pull(wrong); !unauthorized(err) {
		t.Errorf("pulling with a wrong password: got %v, want unauthorized", err)
	}
	if _, err := copyImage(ctx, dockerRef(t, auth.Host+"/pushed/busybox:v2"), dockerRef(t, base), wrong, plain.SystemContext()); !unauthorized(err) {
		t.Errorf("pushing with a wrong password: got %v, want unauthorized", err)
	}
	if tags, err := auth.Tags(ctx, "pushed/busybox"); err != nil || !slices.Equal(tags, []string{"v1"}) {
		t.Errorf("after a refused push, tags of pushed/busybox = %q, %v; want [v1]", tags, err)
	}

	anonymous := *auth
	anonymous.Username, anonymous.Password = "", ""
	resp, err := anonymous.do(ctx, http.MethodGet, "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous GET /v2/ answered %s, want 401", resp.Status)
	}
	if _, err := anonymous.Tags(ctx, "pushed/busybox"); err == nil {
		t.Error("anonymous tag listing succeeded")
	}
	noAuth := anonymous.SystemContext()
	noAuth.AuthFilePath = filepath.Join(t.TempDir(), "absent.json") // not the machine's credentials
	if err := pull(noAuth); !unauthorized(err) {
		t.Errorf("anonymous pull: got %v, want unauthorized", err)
	}
}

// TestRegistryTagsAndUntag checks tag listing and that untagging removes
// only the tag: the manifest, its other tags and other repositories stay.
func TestRegistryTagsAndUntag(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), CaseTimeout)
	defer cancel()
	r := testRegistry(t, ctx, "registry", false)
	base, err := SeedBaseImage(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	const repo = "untag/busybox"
	for _, tag := range []string{"a", "b"} {
		if _, err := copyImage(ctx, dockerRef(t, r.Host+"/"+repo+":"+tag), dockerRef(t, base), r.SystemContext(), r.SystemContext()); err != nil {
			t.Fatal(err)
		}
	}
	tags := func(repo string) []string {
		t.Helper()
		got, err := r.Tags(ctx, repo)
		if err != nil {
			t.Fatalf("tags of %s: %v", repo, err)
		}
		slices.Sort(got)
		return got
	}
	if got := tags(repo); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("tags of %s = %q, want [a b]", repo, got)
	}
	if got := tags("never/pushed"); got == nil || len(got) != 0 {
		t.Errorf("tags of a repository never pushed = %#v, want empty", got)
	}
	digest, err := r.ManifestDigest(ctx, repo, "a")
	if err != nil {
		t.Fatal(err)
	}

	if err := r.Untag(ctx, repo, "a"); err != nil {
		t.Fatalf("untagging a: %v", err)
	}
	if got := tags(repo); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after untagging a, tags of %s = %q, want [b]", repo, got)
	}
	if d, err := r.ManifestDigest(ctx, repo, "b"); err != nil || d != digest {
		t.Errorf("after untagging a, b resolves to %q, %v; want %s", d, err, digest)
	}
	if d, err := r.ManifestDigest(ctx, repo, digest); err != nil || d != digest {
		t.Errorf("after untagging a, the index by digest: %q, %v; want %s", d, err, digest)
	}
	if _, err := r.ManifestDigest(ctx, repo, "a"); err == nil {
		t.Error("the untagged tag a still resolves")
	}
	if err := r.Untag(ctx, repo, "a"); err == nil {
		t.Error("untagging a missing tag succeeded")
	}
	if err := r.Untag(ctx, repo, "b"); err != nil {
		t.Fatalf("untagging b: %v", err)
	}
	if got := tags(repo); len(got) != 0 {
		t.Errorf("after untagging everything, tags of %s = %q, want none", repo, got)
	}
	if d, err := r.ManifestDigest(ctx, repo, digest); err != nil || d != digest {
		t.Errorf("after untagging everything, the index by digest: %q, %v; want %s", d, err, digest)
	}
	if got := tags(BaseImageRepository); !slices.Equal(got, []string{"latest"}) {
		t.Errorf("tags of %s = %q, want [latest]", BaseImageRepository, got)
	}
}
