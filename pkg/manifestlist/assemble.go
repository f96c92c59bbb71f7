package manifestlist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/docker/distribution/registry/api/errcode"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/pkg/blobinfocache/none"
	"go.podman.io/image/v5/types"
	"golang.org/x/sync/errgroup"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// maxConfigSize bounds the image configs Assemble reads: a platform's config
// is a few kilobytes; anything near this is not an image config.
const maxConfigSize = 8 << 20

// fetchParallelism is how many children Assemble reads at once.
const fetchParallelism = 8

// Options are what Assemble needs.
type Options struct {
	// Output is the tag the manifest list is pushed to, e.g.
	// "registry.example.com/team/app:v1": the Build's spec.output.to.name.
	// Every entry's image must be in its repository.
	Output string
	// Entries are the images to list, one per platform (see Select and
	// Entries).
	Entries []Entry
	// Access gives the credentials and TLS settings for the registry.
	Access registry.Access
	// ReadAhead holds the reads of children started before the call, as
	// their platforms completed (nil: none). An entry whose digest it read
	// for the entry's platform and Output is taken from it (waiting for a
	// read under way); any other entry is read by Assemble.
	ReadAhead *ReadAhead
}

// Result is the manifest list Assemble pushed.
type Result struct {
	// Digest is the manifest list's digest: what status.output.to.imageDigest
	// records.
	Digest digest.Digest
	// Reference is the list by digest, e.g.
	// "registry.example.com/team/app@sha256:...".
	Reference string
	// MediaType is the list's media type: an OCI image index or a Docker
	// manifest list.
	MediaType string
	// Manifest is the list as pushed.
	Manifest []byte
	// Children are the images it lists, with what the registry said about
	// them, in the order of the list.
	Children []Child
}

// Assemble reads every entry's manifest and image config from the output's
// repository, checks each config is for the entry's platform, builds the
// manifest list (BuildIndex) and pushes it to opts.Output.
//
// An entry whose digest the repository does not hold, or whose config is
// for another platform, is an *Error with reason PlatformVersionSkew naming
// its platform; every entry's problem is reported, joined. Nothing is pushed
// then. Registry failures (unreachable, credentials refused) are plain
// errors that say which registry and, for credentials, which file.
func Assemble(ctx context.Context, opts Options) (*Result, error) {
	tagged, err := platform.ParseOutput(opts.Output)
	if err != nil {
		return nil, &Error{Reason: buildv1.StatusReasonInvalidOutputReference, Err: err}
	}
	children, err := FetchChildren(ctx, opts)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, c := range children {
		if err := CheckChild(c.Entry, c.Config); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	list, mediaType, err := BuildIndex(children)
	if err != nil {
		return nil, err
	}
	listDigest := digest.FromBytes(list)
	if err := push(ctx, opts.Access, tagged, list); err != nil {
		return nil, err
	}
	byDigest, err := reference.WithDigest(reference.TrimNamed(tagged), listDigest)
	if err != nil {
		return nil, err
	}
	_, ordered, _ := indexEntries(children) // the order BuildIndex used; it succeeded above
	return &Result{
		Digest:    listDigest,
		Reference: byDigest.String(),
		MediaType: mediaType,
		Manifest:  list,
		Children:  ordered,
	}, nil
}

// FetchChildren reads the manifest and image config of every entry's image
// from the repository of opts.Output, several at a time, and returns them in
// the order of opts.Entries; those opts.ReadAhead read already are taken
// from it. It checks nothing about the platforms (see
// CheckChild); a digest the repository does not hold is an *Error with reason
// PlatformVersionSkew.
func FetchChildren(ctx context.Context, opts Options) ([]Child, error) {
	tagged, err := platform.ParseOutput(opts.Output)
	if err != nil {
		return nil, &Error{Reason: buildv1.StatusReasonInvalidOutputReference, Err: err}
	}
	repo := reference.TrimNamed(tagged)
	sys := opts.Access.SystemContext(reference.Domain(repo))
	children := make([]Child, len(opts.Entries))
	errs := make([]error, len(opts.Entries))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fetchParallelism)
	for i, e := range opts.Entries {
		g.Go(func() error {
			if c, ok := opts.ReadAhead.Child(gctx, opts.Output, e); ok {
				children[i] = c
				return nil
			}
			children[i], errs[i] = fetchChild(gctx, sys, opts.Access.CredentialSource(), repo, e)
			return nil
		})
	}
	_ = g.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return children, nil
}

// fetchChild reads one entry's manifest and config.
func fetchChild(ctx context.Context, sys *types.SystemContext, credSource string, repo reference.Named, e Entry) (Child, error) {
	if err := e.Digest.Validate(); err != nil {
		return Child{}, skewError(e.Platform, fmt.Errorf("platform %s: image digest %q: %w", e.Platform, e.Digest, err))
	}
	byDigest, err := reference.WithDigest(repo, e.Digest)
	if err != nil {
		return Child{}, err
	}
	ref, err := docker.NewReference(byDigest)
	if err != nil {
		return Child{}, err
	}
	src, err := ref.NewImageSource(ctx, sys)
	if err != nil {
		return Child{}, childError(e, byDigest, credSource, err)
	}
	defer src.Close()
	raw, mediaType, err := src.GetManifest(ctx, nil)
	if err != nil {
		return Child{}, childError(e, byDigest, credSource, err)
	}
	if ok, err := manifest.MatchesDigest(raw, e.Digest); err != nil || !ok {
		return Child{}, fmt.Errorf("platform %s: the registry's manifest for %s does not have that digest", e.Platform, byDigest)
	}
	if guessed := manifest.GuessMIMEType(raw); guessed != "" {
		mediaType = guessed // the manifest's own mediaType field, which the list entry must repeat
	}
	if manifest.MIMETypeIsMultiImage(mediaType) {
		return Child{}, &Error{Reason: buildv1.StatusReasonManifestListFailed, Platform: e.Platform,
			Err: fmt.Errorf("platform %s: %s is itself a manifest list (%s), not one platform's image", e.Platform, byDigest, mediaType)}
	}
	if mediaType != ocispec.MediaTypeImageManifest && mediaType != manifest.DockerV2Schema2MediaType {
		return Child{}, &Error{Reason: buildv1.StatusReasonManifestListFailed, Platform: e.Platform,
			Err: fmt.Errorf("platform %s: %s is a %s, which a manifest list cannot list: push OCI or Docker schema 2 images", e.Platform, byDigest, mediaType)}
	}
	m, err := manifest.FromBlob(raw, mediaType)
	if err != nil {
		return Child{}, fmt.Errorf("platform %s: reading the manifest of %s: %w", e.Platform, byDigest, err)
	}
	config, err := readConfig(ctx, src, m.ConfigInfo())
	if err != nil {
		return Child{}, fmt.Errorf("platform %s: reading the image config of %s: %w", e.Platform, byDigest, childError(e, byDigest, credSource, err))
	}
	return Child{
		Entry:     e,
		MediaType: mediaType,
		Size:      int64(len(raw)),
		Config:    config.Platform,
	}, nil
}

// readConfig reads and verifies an image config. Docker's and OCI's configs
// spell the platform fields the same way.
func readConfig(ctx context.Context, src types.ImageSource, info types.BlobInfo) (ocispec.Image, error) {
	rc, _, err := src.GetBlob(ctx, info, none.NoCache)
	if err != nil {
		return ocispec.Image{}, err
	}
	defer rc.Close()
	verifier := info.Digest.Verifier()
	data, err := io.ReadAll(io.TeeReader(io.LimitReader(rc, maxConfigSize+1), verifier))
	if err != nil {
		return ocispec.Image{}, err
	}
	if len(data) > maxConfigSize {
		return ocispec.Image{}, fmt.Errorf("config %s is larger than %d bytes", info.Digest, maxConfigSize)
	}
	if !verifier.Verified() {
		return ocispec.Image{}, fmt.Errorf("config %s does not have that digest", info.Digest)
	}
	var config ocispec.Image
	if err := json.Unmarshal(data, &config); err != nil {
		return ocispec.Image{}, fmt.Errorf("config %s: %w", info.Digest, err)
	}
	return config, nil
}

// childError says what went wrong reading a child: missing from the
// repository is version skew; refused credentials name the auth file.
func childError(e Entry, ref reference.Named, credSource string, err error) error {
	if isNotFound(err) {
		return skewError(e.Platform, fmt.Errorf(
			"platform %s recorded image digest %s, which %s does not hold: the image was pushed elsewhere or removed (version skew): %w",
			e.Platform, e.Digest, reference.TrimNamed(ref).Name(), err))
	}
	return fmt.Errorf("platform %s: reading %s: %w", e.Platform, ref, credentialsHint(credSource, err))
}

// isNotFound reports whether a containers/image error says the registry does
// not have the manifest, blob or repository.
//
// The registry's error codes are matched with the archived
// github.com/docker/distribution errcode package on purpose: containers/image
// (go.podman.io/image/v5 v5.41.0, the version buildah v1.45.0 needs) decodes
// registry errors into that package's types itself. Measured with a registry
// answering 404 MANIFEST_UNKNOWN: errors.As finds the docker/distribution
// errcode.Error and never the maintained
// github.com/distribution/distribution/v3 one, so switching would silently
// break this check; and the module stays in go.mod anyway, since
// containers/image imports it.
func isNotFound(err error) bool {
	var ec errcode.Error
	if errors.As(err, &ec) {
		switch ec.Code.Descriptor().Value {
		case "MANIFEST_UNKNOWN", "BLOB_UNKNOWN", "NAME_UNKNOWN", "NOT_FOUND":
			return true
		}
	}
	var status docker.UnexpectedHTTPStatusError
	return errors.As(err, &status) && status.StatusCode == 404
}

// credentialsHint adds to an authentication error where the credentials came
// from, the first thing to check.
func credentialsHint(credSource string, err error) error {
	var unauthorized docker.ErrUnauthorizedForCredentials
	if !errors.As(err, &unauthorized) {
		var ec errcode.Error
		if !errors.As(err, &ec) || (ec.Code != errcode.ErrorCodeUnauthorized && ec.Code != errcode.ErrorCodeDenied) {
			return err
		}
	}
	return fmt.Errorf("%w (credentials from %s)", err, credSource)
}

// push puts the list at the output tag.
func push(ctx context.Context, access registry.Access, tagged reference.NamedTagged, list []byte) error {
	ref, err := docker.NewReference(tagged)
	if err != nil {
		return err
	}
	dest, err := ref.NewImageDestination(ctx, access.SystemContext(reference.Domain(tagged)))
	if err != nil {
		return fmt.Errorf("pushing the manifest list to %s: %w", tagged, credentialsHint(access.CredentialSource(), err))
	}
	defer dest.Close()
	if err := dest.PutManifest(ctx, list, nil); err != nil {
		return fmt.Errorf("pushing the manifest list to %s: %w", tagged, credentialsHint(access.CredentialSource(), err))
	}
	if err := dest.Commit(ctx, nil); err != nil {
		return fmt.Errorf("pushing the manifest list to %s: %w", tagged, err)
	}
	return nil
}
