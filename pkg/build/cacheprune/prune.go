// Package cacheprune removes old entries from layer cache repositories, as
// `oc adm prune images` removes old images: the tags archway writes to a
// platform's cache repository (each build step buildah pushes under its
// cache key, 64 lowercase hexadecimal digits, and each whole result under
// "result-" and its key) whose image was created before a cut-off. Any other
// tag is left alone. A tag is removed with the distribution API's tag
// deletion (manifestlist.Untag), never by digest; the registry's garbage
// collection frees the blobs no tag reaches any more. A pruned step is
// simply built and pushed again by the next build that needs it.
package cacheprune

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	ggcrtypes "github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"

	"github.com/archway-build/archway/pkg/manifestlist"
	"github.com/archway-build/archway/pkg/registry"
	regremote "github.com/archway-build/archway/pkg/registry/remote"
)

// Limits on what a registry may make a prune read. A cache image's manifest
// and config are bounded as the layer cache's reads bound them, by
// remote.MaxManifestSize and remote.MaxConfigSize of package
// registry/remote.
const (
	// MaxTagListPageSize bounds one page of a repository's tag list.
	MaxTagListPageSize = 8 << 20
	// MaxTags is the most tags listed per repository, MaxTagPages the
	// most pages: a registry that answers more is reported, and nothing
	// of that repository is removed.
	MaxTags     = 100_000
	MaxTagPages = 1_000
	// DefaultParallel is how many images are read at once.
	DefaultParallel = 8
)

// cacheTag matches the tags archway writes to a cache repository: a step's
// cache key, or a whole result's.
var cacheTag = regexp.MustCompile(`^(result-)?[0-9a-f]{64}$`)

// IsCacheTag reports whether tag is one archway writes to a cache
// repository (and so one a prune may remove).
func IsCacheTag(tag string) bool { return cacheTag.MatchString(tag) }

// Action is what a prune did, or would do, with a tag.
type Action string

// The actions.
const (
	Removed     Action = "removed"
	WouldRemove Action = "would remove"
	Kept        Action = "kept"
	// Failed: the tag was to be removed, and removing it failed.
	Failed Action = "failed"
)

// Options say what to prune and how.
type Options struct {
	// Access gives the credentials and TLS rules for the registries.
	Access registry.Access
	// KeepYoungerThan keeps images created less than this long before
	// Now; zero removes every cache image.
	KeepYoungerThan time.Duration
	// Confirm removes tags; without it a prune only says what it would
	// remove.
	Confirm bool
	// Now is the time the age is measured from; zero: time.Now().
	Now time.Time
	// Parallel bounds the images read at once; zero: DefaultParallel.
	Parallel int
}

// Tag is one tag of a cache repository and what the prune did with it.
type Tag struct {
	Tag string `json:"tag"`
	// Created is the image config's created time, when it was read.
	Created *time.Time `json:"created,omitempty"`
	Action  Action     `json:"action"`
	// Reason says why a tag was kept or why removing it failed.
	Reason string `json:"reason,omitempty"`
}

// Repository is what a prune found and did in one cache repository.
type Repository struct {
	Repository string `json:"repository"`
	// Error is why the repository could not be pruned (its tags could not
	// be listed); nothing of it was removed.
	Error string `json:"error,omitempty"`
	Tags  []Tag  `json:"tags,omitempty"`
}

// Validate refuses options no prune should run with.
func (o Options) Validate() error {
	if o.KeepYoungerThan < 0 {
		return fmt.Errorf("--keep-younger-than %s is negative: give a duration of 0 or more, e.g. 168h", o.KeepYoungerThan)
	}
	if o.Parallel < 0 {
		return fmt.Errorf("parallelism %d is negative", o.Parallel)
	}
	return nil
}

// Prune lists each repository's tags, reads the created time of each cache
// tag's image and removes (with Confirm) or reports the tags of images
// created before the cut-off. A failure in one repository or tag is
// reported in its result and does not stop the others.
func Prune(ctx context.Context, repositories []string, o Options) ([]Repository, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Parallel == 0 {
		o.Parallel = DefaultParallel
	}
	out := make([]Repository, 0, len(repositories))
	for _, repo := range repositories {
		out = append(out, pruneRepository(ctx, repo, o))
	}
	return out, nil
}

// pruneRepository prunes one repository.
func pruneRepository(ctx context.Context, repository string, o Options) Repository {
	res := Repository{Repository: repository}
	r, err := connect(ctx, o.Access, repository)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	tags, err := r.list(ctx)
	if err != nil {
		res.Error = "listing its tags: " + r.explain(err).Error()
		return res
	}
	slices.Sort(tags)
	tags = slices.Compact(tags)
	cutoff := o.Now.Add(-o.KeepYoungerThan)
	res.Tags = make([]Tag, len(tags))
	var g errgroup.Group
	g.SetLimit(o.Parallel)
	for i, tag := range tags {
		res.Tags[i].Tag = tag
		if !IsCacheTag(tag) {
			res.Tags[i].Action, res.Tags[i].Reason = Kept, "not a cache tag"
			continue
		}
		g.Go(func() error {
			t := &res.Tags[i]
			created, digest, err := r.created(ctx, tag)
			switch {
			case err != nil:
				t.Action, t.Reason = Kept, err.Error()
			case !created.Before(cutoff):
				t.Created, t.Action, t.Reason = &created, Kept, "younger than "+o.KeepYoungerThan.String()
			default:
				t.Created = &created
				t.Action = WouldRemove
				if o.Confirm {
					r.remove(ctx, tag, digest, t)
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	return res
}

// repo reaches one cache repository.
type repo struct {
	access registry.Access
	// anonymous is true when no credentials were found, for messages.
	anonymous bool
	name      name.Repository
	opts      []remote.Option
	mu        sync.Mutex // serialises removals
	// untagger removes tags, authenticated for deleting on the first
	// removal; untagErr is why it could not be.
	untagger *manifestlist.Untagger
	untagErr error
}

// connect finds the repository's credentials and transport (as every
// registry client of archway does) and authenticates once for its reads.
func connect(ctx context.Context, access registry.Access, repository string) (*repo, error) {
	e, err := regremote.Resolve(access, repository)
	if err != nil {
		return nil, err
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuth(e.Auth),
		remote.WithTransport(regremote.LimitAnswers(e.Transport, limits)), remote.WithPageSize(1000)}
	puller, err := remote.NewPuller(opts...)
	if err != nil {
		return nil, err
	}
	return &repo{access: access, anonymous: e.Anonymous, name: e.Repository, opts: append(opts, remote.Reuse(puller))}, nil
}

// explain says which credentials a registry refused, or that it wants some.
func (r *repo) explain(err error) error {
	var terr *transport.Error
	if !errors.As(err, &terr) || (terr.StatusCode != http.StatusUnauthorized && terr.StatusCode != http.StatusForbidden) {
		return err
	}
	if r.anonymous {
		return fmt.Errorf("registry %s requires credentials, and none were found for it in %s: %w", r.name.RegistryStr(), r.access.CredentialSource(), err)
	}
	return fmt.Errorf("the registry refused the credentials for %s from %s: %w", r.name.RegistryStr(), r.access.CredentialSource(), err)
}

// list returns the repository's tags, following the registry's pages up to
// MaxTagPages pages and MaxTags tags. A repository that does not exist has
// no tags.
func (r *repo) list(ctx context.Context) ([]string, error) {
	puller, err := remote.NewPuller(r.opts...)
	if err != nil {
		return nil, err
	}
	lister, err := puller.Lister(ctx, r.name)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	var tags []string
	for pages := 0; lister.HasNext(); pages++ {
		if pages == MaxTagPages {
			return nil, fmt.Errorf("the registry's tag list goes on for more than %d pages (%d tags so far): not pruned", MaxTagPages, len(tags))
		}
		page, err := lister.Next(ctx)
		if err != nil {
			if isNotFound(err) && pages == 0 {
				return nil, nil
			}
			return nil, err
		}
		tags = append(tags, page.Tags...)
		if len(tags) > MaxTags {
			return nil, fmt.Errorf("the registry lists more than %d tags: not pruned", MaxTags)
		}
	}
	return tags, nil
}

// created reads the created time of the image under tag, and the digest of
// its manifest. An index, an artifact, a manifest or config beyond the
// limits, or an unreadable image is an error saying so.
func (r *repo) created(ctx context.Context, tag string) (time.Time, v1.Hash, error) {
	desc, err := remote.Get(r.name.Tag(tag), append(slices.Clip(r.opts), remote.WithContext(ctx))...)
	if err != nil {
		return time.Time{}, v1.Hash{}, fmt.Errorf("its manifest could not be read: %w", err)
	}
	if desc.MediaType.IsIndex() {
		return time.Time{}, v1.Hash{}, fmt.Errorf("an image index (%s), not a cache image: left alone", desc.MediaType)
	}
	if desc.MediaType != ggcrtypes.OCIManifestSchema1 && desc.MediaType != ggcrtypes.DockerManifestSchema2 {
		return time.Time{}, v1.Hash{}, fmt.Errorf("a %s, not a cache image: left alone", desc.MediaType)
	}
	img, err := desc.Image()
	if err != nil {
		return time.Time{}, v1.Hash{}, err
	}
	m, err := img.Manifest()
	if err != nil {
		return time.Time{}, v1.Hash{}, fmt.Errorf("its manifest is not an image manifest: %w", err)
	}
	if m.Config.MediaType != ggcrtypes.OCIConfigJSON && m.Config.MediaType != ggcrtypes.DockerConfigJSON {
		return time.Time{}, v1.Hash{}, fmt.Errorf("an artifact (config %s), not a cache image: left alone", m.Config.MediaType)
	}
	if m.Config.Size <= 0 || m.Config.Size > regremote.MaxConfigSize {
		return time.Time{}, v1.Hash{}, fmt.Errorf("its config has %d bytes, not 1 to %d: left alone", m.Config.Size, regremote.MaxConfigSize)
	}
	// go-containerregistry reads the config's size and checks its digest.
	cfg, err := img.ConfigFile()
	if err != nil {
		return time.Time{}, v1.Hash{}, fmt.Errorf("its config could not be read: %w", err)
	}
	if cfg.Created.IsZero() {
		return time.Time{}, v1.Hash{}, errors.New("its config records no created time: left alone")
	}
	return cfg.Created.Time, desc.Digest, nil
}

// remove deletes tag, unless it was moved to another image since it was
// read (a build pushed the step again).
func (r *repo) remove(ctx context.Context, tag string, read v1.Hash, t *Tag) {
	r.mu.Lock()
	defer r.mu.Unlock()
	head, err := remote.Head(r.name.Tag(tag), append(slices.Clip(r.opts), remote.WithContext(ctx))...)
	switch {
	case isNotFound(err):
		t.Action, t.Reason = Removed, "already gone"
		return
	case err != nil:
		t.Action, t.Reason = Failed, "reading it again before removing: "+err.Error()
		return
	case head.Digest != read:
		t.Action, t.Reason = Kept, "pushed again while pruning"
		return
	}
	if r.untagger == nil && r.untagErr == nil {
		r.untagger, r.untagErr = manifestlist.NewUntagger(ctx, r.access, r.name.Name())
	}
	if r.untagErr != nil {
		t.Action, t.Reason = Failed, r.untagErr.Error()
		return
	}
	if err := r.untagger.Untag(ctx, tag); err != nil {
		t.Action, t.Reason = Failed, err.Error()
		return
	}
	t.Action = Removed
}

func isNotFound(err error) bool {
	var terr *transport.Error
	if errors.As(err, &terr) {
		return terr.StatusCode == http.StatusNotFound
	}
	return false
}

// limits bounds what the registry's answers may make a prune read:
// manifests, configs and pages of the tag list, whatever sizes the registry
// declares.
func limits(first *http.Request) (int64, string) {
	switch regremote.PathKind(first.URL.Path) {
	case regremote.ManifestPath:
		return regremote.MaxManifestSize, "the registry's manifest"
	case regremote.BlobPath:
		return regremote.MaxConfigSize, "the registry's config"
	case regremote.TagListPath:
		return MaxTagListPageSize, "the registry's tag list page"
	default:
		// Anything else (a next page at the address the registry's Link
		// header gives, for one) is bounded by the largest limit.
		return max(regremote.MaxManifestSize, regremote.MaxConfigSize, MaxTagListPageSize), "the registry's answer"
	}
}
