package image

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/lru"
)

// CacheOptions size a Cache and set its lifetimes.
type CacheOptions struct {
	// DigestTTL is how long the platforms of a digest are kept. A digest
	// names immutable content, so this can be long; default 24h.
	DigestTTL time.Duration
	// TagTTL is how long a tag's resolution to a digest is trusted before
	// it is resolved again with a manifest HEAD; default 1m.
	TagTTL time.Duration
	// Size bounds each of the two maps (digests, tags), least recently used
	// entries leaving first; default 10,000.
	Size int
	// Now is the clock; default time.Now.
	Now func() time.Time
	// OnLookup, when set, is told of every cache lookup: which map
	// ("digest" or "tag") and whether it hit.
	OnLookup func(cache string, hit bool)
}

// Cache decorates a Registry so that each image costs as few registry
// round trips as correctness allows:
//   - platforms are cached by digest (immutable) for DigestTTL, LRU-bounded;
//   - a tag's digest is cached for TagTTL; after that, or for references
//     with Refresh set, the tag is resolved again with one manifest HEAD and
//     the platforms come from the digest map when the tag did not move;
//   - every key includes a hash of the credentials, so one pod's secrets
//     never answer another pod's question;
//   - concurrent misses for one key share one registry call.
type Cache struct {
	inner   Registry
	opts    CacheOptions
	digests *lru.Cache // digestKey -> digestEntry
	tags    *lru.Cache // tagKey -> tagEntry
	flight  singleflight.Group
	// gen counts Purges: a registry answer fetched before a Purge is
	// neither cached nor shared with calls begun after it.
	gen atomic.Uint64
}

type digestEntry struct {
	platforms Platforms
	expires   time.Time
}

type tagEntry struct {
	digest  digest.Digest
	expires time.Time
}

// NewCache decorates inner.
func NewCache(inner Registry, opts CacheOptions) *Cache {
	if opts.DigestTTL <= 0 {
		opts.DigestTTL = 24 * time.Hour
	}
	if opts.TagTTL <= 0 {
		opts.TagTTL = time.Minute
	}
	if opts.Size <= 0 {
		opts.Size = 10000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Cache{inner: inner, opts: opts, digests: lru.New(opts.Size), tags: lru.New(opts.Size)}
}

var _ Inspector = (*Cache)(nil)

// Purge forgets everything cached, for when the registry configuration
// changed (a mirror, a CA, a blocked registry can change any answer).
// Calls under way finish with what they fetched but cache none of it.
func (c *Cache) Purge() {
	c.gen.Add(1)
	c.digests.Clear()
	c.tags.Clear()
}

// Len returns the number of cached digests and tags.
func (c *Cache) Len() (digests, tags int) { return c.digests.Len(), c.tags.Len() }

// Architectures answers from the cache when it can, else from the
// registry, and caches what it learns.
func (c *Cache) Architectures(ctx context.Context, ref Reference, auth Auth) (Platforms, digest.Digest, error) {
	named, err := reference.ParseNormalizedNamed(ref.Name)
	if err != nil {
		return nil, "", &ReferenceError{Err: fmt.Errorf("parsing image reference %q: %w", ref.Name, err)}
	}
	credKey := auth.Key()
	repo := named.Name()
	if canonical, ok := named.(reference.Canonical); ok {
		return c.byDigest(ctx, repo, canonical.Digest(), auth, credKey)
	}
	named = reference.TagNameOnly(named)
	tagKey := named.String() + "|" + credKey
	now := c.opts.Now()
	if v, ok := c.tags.Get(tagKey); ok {
		e := v.(tagEntry)
		fresh := now.Before(e.expires) && !ref.Refresh
		c.observe("tag", fresh)
		if !fresh {
			// The tag was seen before: one HEAD tells whether it moved.
			d, err := c.shared(ctx, "head|"+tagKey, func(ctx context.Context) (any, error) {
				gen := c.gen.Load()
				d, err := c.inner.Digest(ctx, named.String(), auth)
				if err == nil && c.gen.Load() == gen {
					c.tags.Add(tagKey, tagEntry{digest: d, expires: c.opts.Now().Add(c.opts.TagTTL)})
				}
				return d, err
			})
			if err != nil {
				return nil, "", err
			}
			e.digest = d.(digest.Digest)
		}
		return c.byDigest(ctx, repo, e.digest, auth, credKey)
	}
	c.observe("tag", false)
	// Never seen: one GET by tag gives both the digest and the platforms.
	v, err := c.shared(ctx, "get|"+tagKey, func(ctx context.Context) (any, error) {
		gen := c.gen.Load()
		ps, d, err := c.inner.Architectures(ctx, Reference{Name: named.String()}, auth)
		if err != nil {
			return nil, err
		}
		if c.gen.Load() != gen {
			return resolved{platforms: ps, digest: d}, nil
		}
		now := c.opts.Now()
		c.tags.Add(tagKey, tagEntry{digest: d, expires: now.Add(c.opts.TagTTL)})
		c.digests.Add(digestKey(repo, d, credKey), digestEntry{platforms: ps, expires: now.Add(c.opts.DigestTTL)})
		return resolved{platforms: ps, digest: d}, nil
	})
	if err != nil {
		return nil, "", err
	}
	r := v.(resolved)
	return r.platforms, r.digest, nil
}

// resolved is what a registry GET by tag returns to all who waited for it.
type resolved struct {
	platforms Platforms
	digest    digest.Digest
}

func (c *Cache) byDigest(ctx context.Context, repo string, d digest.Digest, auth Auth, credKey string) (Platforms, digest.Digest, error) {
	key := digestKey(repo, d, credKey)
	if v, ok := c.digests.Get(key); ok && c.opts.Now().Before(v.(digestEntry).expires) {
		c.observe("digest", true)
		return v.(digestEntry).platforms, d, nil
	}
	c.observe("digest", false)
	v, err := c.shared(ctx, "digest|"+key, func(ctx context.Context) (any, error) {
		gen := c.gen.Load()
		ps, _, err := c.inner.Architectures(ctx, Reference{Name: repo + "@" + d.String()}, auth)
		if err != nil {
			return nil, err
		}
		if c.gen.Load() == gen {
			c.digests.Add(key, digestEntry{platforms: ps, expires: c.opts.Now().Add(c.opts.DigestTTL)})
		}
		return ps, nil
	})
	if err != nil {
		return nil, "", err
	}
	return v.(Platforms), d, nil
}

// shared runs fn once for all concurrent callers with the same key. The
// call is detached from any one caller's cancellation (the registry call is
// bounded by its own timeout), and each caller stops waiting when its own
// context ends.
func (c *Cache) shared(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	key = strconv.FormatUint(c.gen.Load(), 10) + "|" + key
	ch := c.flight.DoChan(key, func() (any, error) {
		return fn(context.WithoutCancel(ctx))
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Cache) observe(cache string, hit bool) {
	if c.opts.OnLookup != nil {
		c.opts.OnLookup(cache, hit)
	}
}

func digestKey(repo string, d digest.Digest, credKey string) string {
	return repo + "@" + d.String() + "|" + credKey
}

// Digest resolves ref to the digest of its manifest or index without
// reading either: a digest reference names its own; a tag's digest comes
// from the tag map while it is fresh (and ref.Refresh is not set), else
// from one manifest HEAD, which the map then keeps for Architectures too.
func (c *Cache) Digest(ctx context.Context, ref Reference, auth Auth) (digest.Digest, error) {
	named, err := reference.ParseNormalizedNamed(ref.Name)
	if err != nil {
		return "", &ReferenceError{Err: fmt.Errorf("parsing image reference %q: %w", ref.Name, err)}
	}
	if canonical, ok := named.(reference.Canonical); ok {
		return canonical.Digest(), nil
	}
	named = reference.TagNameOnly(named)
	tagKey := named.String() + "|" + auth.Key()
	if v, ok := c.tags.Get(tagKey); ok && !ref.Refresh && c.opts.Now().Before(v.(tagEntry).expires) {
		c.observe("tag", true)
		return v.(tagEntry).digest, nil
	}
	c.observe("tag", false)
	d, err := c.shared(ctx, "head|"+tagKey, func(ctx context.Context) (any, error) {
		gen := c.gen.Load()
		d, err := c.inner.Digest(ctx, named.String(), auth)
		if err == nil && c.gen.Load() == gen {
			c.tags.Add(tagKey, tagEntry{digest: d, expires: c.opts.Now().Add(c.opts.TagTTL)})
		}
		return d, err
	})
	if err != nil {
		return "", err
	}
	return d.(digest.Digest), nil
}
