// Package manifestlist_test checks manifest-list assembly, pushing and
// untagging against real CNCF Distribution registries, and `builder
// manifest-list` against Builds on a real apiserver, all from the bed.
package manifestlist_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/directory"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"

	"github.com/archway-build/archway/pkg/manifestlist"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/test/bed"
	"github.com/archway-build/archway/test/framework"
)

// fourPlatforms are the platforms the tests build manifest lists of.
var fourPlatforms = []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}

var (
	theBed *bed.Bed
	// baseChildren are the digests of the base index's images, by canonical
	// platform.
	baseChildren map[string]digest.Digest
	// baseRepo is the base image's repository, e.g. 127.0.0.1:4000/archway/busybox.
	baseRepo string
)

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m, framework.Options{
		Name: "manifestlist suite",
		Bed:  bed.Options{WithoutNodes: true, AuthRegistry: true},
		Setup: func(ctx context.Context, s *framework.Suite) (func(), error) {
			theBed = s.Bed
			baseRepo = strings.TrimSuffix(theBed.BaseImage, ":latest")
			var err error
			if baseChildren, err = readBaseChildren(ctx); err != nil {
				return nil, fmt.Errorf("reading the base image: %w", err)
			}
			return nil, nil
		},
	}))
}

// readBaseChildren reads the base index's children.
func readBaseChildren(ctx context.Context) (map[string]digest.Digest, error) {
	raw, _, err := getManifest(ctx, theBed.Registry, theBed.BaseImage)
	if err != nil {
		return nil, err
	}
	index, err := manifest.OCI1IndexFromManifest(raw)
	if err != nil {
		return nil, err
	}
	children := map[string]digest.Digest{}
	for _, d := range index.Manifests {
		children[platform.FromOCI(*d.Platform).Key()] = d.Digest
	}
	return children, nil
}

// getManifest reads the manifest or index ref names from reg.
func getManifest(ctx context.Context, reg *bed.Registry, ref string) ([]byte, string, error) {
	r, err := docker.ParseReference("//" + ref)
	if err != nil {
		return nil, "", err
	}
	src, err := r.NewImageSource(ctx, reg.SystemContext())
	if err != nil {
		return nil, "", err
	}
	defer src.Close()
	return src.GetManifest(ctx, nil)
}

// pushOptions say how pushPlatforms pushes.
type pushOptions struct {
	// dockerSchema2 converts the images to Docker schema 2 manifests.
	dockerSchema2 bool
	// as pushes each image under another platform's tag:
	// as["linux/ppc64le"] = "linux/arm64" pushes the arm64 image as ppc64le.
	as map[string]string
	// to pushes every image to this reference instead of its platform's tag.
	to string
}

// pushPlatforms pushes the base image's image of each platform to
// PlatformTag(output, platform) in reg, as a platform's build pod would, and
// returns their digests by platform.
func pushPlatforms(t testing.TB, reg *bed.Registry, output string, platforms []string, opts pushOptions) map[string]digest.Digest {
	t.Helper()
	ctx := context.Background()
	policy, err := signature.NewPolicyContext(&signature.Policy{
		Default: signature.PolicyRequirements{signature.NewPRInsecureAcceptAnything()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = policy.Destroy() }()
	digests := map[string]digest.Digest{}
	for _, p := range platforms {
		source := p
		if other, ok := opts.as[p]; ok {
			source = other
		}
		parsed, err := platform.Parse(source)
		if err != nil {
			t.Fatal(err)
		}
		child, ok := baseChildren[parsed.Key()]
		if !ok {
			t.Fatalf("the base image has no %s", source)
		}
		src, err := docker.ParseReference("//" + baseRepo + "@" + child.String())
		if err != nil {
			t.Fatal(err)
		}
		tag, err := platform.Tag(output, p)
		if err != nil {
			t.Fatal(err)
		}
		if opts.to != "" {
			tag = opts.to
		}
		dest, err := docker.ParseReference("//" + tag)
		if err != nil {
			t.Fatal(err)
		}
		copyOpts := &copy.Options{
			SourceCtx:          theBed.Registry.SystemContext(),
			DestinationCtx:     reg.SystemContext(),
			ImageListSelection: copy.CopySystemImage,
			PreserveDigests:    !opts.dockerSchema2,
		}
		if opts.dockerSchema2 {
			copyOpts.ForceManifestMIMEType = manifest.DockerV2Schema2MediaType
		}
		raw, err := copy.Image(ctx, policy, dest, src, copyOpts)
		if err != nil {
			t.Fatalf("pushing %s: %v", tag, err)
		}
		digests[p] = digest.FromBytes(raw)
	}
	return digests
}

// entries are the manifest-list entries of pushed images.
func entries(digests map[string]digest.Digest, platforms []string) []manifestlist.Entry {
	var out []manifestlist.Entry
	for _, p := range platforms {
		out = append(out, manifestlist.Entry{Platform: p, Digest: digests[p]})
	}
	return out
}

// repoName returns a repository name of its own for a test.
func repoName(t testing.TB) string {
	name := strings.ToLower(t.Name())
	name = strings.NewReplacer("/", "-", "_", "-", " ", "-").Replace(name)
	return "ml/" + name
}

// platformTags are the per-platform tags of output.
func platformTags(t testing.TB, output string, platforms []string) []string {
	t.Helper()
	tags, err := platform.Tags(output, platforms)
	if err != nil {
		t.Fatal(err)
	}
	return tags
}

// readIndex reads the index at ref, whether OCI or Docker.
func readIndex(t testing.TB, reg *bed.Registry, ref string) (ocispec.Index, string, digest.Digest) {
	t.Helper()
	raw, mediaType, err := getManifest(context.Background(), reg, ref)
	if err != nil {
		t.Fatalf("reading %s: %v", ref, err)
	}
	if _, err := manifest.ListFromBlob(raw, mediaType); err != nil {
		t.Fatalf("%s is not a manifest list (%s): %v", ref, mediaType, err)
	}
	var index ocispec.Index
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatal(err)
	}
	return index, mediaType, digest.FromBytes(raw)
}

// pullAll copies the image ref names, with every image of an index, into
// a directory: every manifest, config and layer must be there.
func pullAll(t testing.TB, reg *bed.Registry, ref string) {
	t.Helper()
	policy, err := signature.NewPolicyContext(&signature.Policy{
		Default: signature.PolicyRequirements{signature.NewPRInsecureAcceptAnything()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = policy.Destroy() }()
	src, err := docker.ParseReference("//" + ref)
	if err != nil {
		t.Fatal(err)
	}
	dest, err := directory.NewReference(filepath.Join(t.TempDir(), "pulled"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := copy.Image(context.Background(), policy, dest, src, &copy.Options{
		SourceCtx:          reg.SystemContext(),
		DestinationCtx:     &types.SystemContext{},
		ImageListSelection: copy.CopyAllImages,
		PreserveDigests:    true,
	}); err != nil {
		t.Fatalf("pulling %s by digest: %v", ref, err)
	}
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
