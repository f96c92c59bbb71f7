package image

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/archway-build/archway/pkg/platform"
)

// fakeRegistry is a registry in memory: tags point at digests, digests
// have platforms. It counts calls and can hold them until released.
type fakeRegistry struct {
	mu        sync.Mutex
	tags      map[string]digest.Digest // "repo:tag" -> digest
	platforms map[digest.Digest]Platforms
	auth      map[string]string // repo -> the only username allowed
	gets      atomic.Int64
	heads     atomic.Int64
	gate      chan struct{} // when non-nil, calls wait for it to close
}

func newFakeRegistry() *fakeRegistry {
	return &fakeRegistry{tags: map[string]digest.Digest{}, platforms: map[digest.Digest]Platforms{}, auth: map[string]string{}}
}

func (f *fakeRegistry) push(repoTag string, ps ...platform.Platform) digest.Digest {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := digest.FromString(fmt.Sprint(repoTag, ps, len(f.platforms)))
	f.tags[repoTag] = d
	f.platforms[d] = ps
	return d
}

func (f *fakeRegistry) lookup(name string, auth Auth) (Platforms, digest.Digest, error) {
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	repo, ref := splitRef(name)
	if user, ok := f.auth[repo]; ok && (len(auth) == 0 || auth[0].Username != user) {
		return nil, "", errors.New("unauthorized")
	}
	d := digest.Digest(ref)
	if d.Validate() != nil {
		var ok bool
		if d, ok = f.tags[repo+":"+ref]; !ok {
			return nil, "", errors.New("manifest unknown")
		}
	}
	ps, ok := f.platforms[d]
	if !ok {
		return nil, "", errors.New("manifest unknown")
	}
	return ps, d, nil
}

func splitRef(name string) (repo, ref string) {
	if repo, d, ok := strings.Cut(name, "@"); ok {
		return repo, d
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return name[:i], name[i+1:]
	}
	return name, "latest"
}

func (f *fakeRegistry) Architectures(_ context.Context, ref Reference, auth Auth) (Platforms, digest.Digest, error) {
	f.gets.Add(1)
	return f.lookup(ref.Name, auth)
}

func (f *fakeRegistry) Digest(_ context.Context, name string, auth Auth) (digest.Digest, error) {
	f.heads.Add(1)
	_, d, err := f.lookup(name, auth)
	return d, err
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

var (
	amd64 = platform.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = platform.Platform{OS: "linux", Architecture: "arm64"}
)

func TestCacheTagsAndDigests(t *testing.T) {
	ctx := context.Background()
	reg := newFakeRegistry()
	clk := &clock{t: time.Unix(1000, 0)}
	c := NewCache(reg, CacheOptions{TagTTL: time.Minute, DigestTTL: time.Hour, Now: clk.now})
	first := reg.push("r.example/app:v1", amd64)

	type step struct {
		name       string
		act        func()
		ref        Reference
		want       string
		gets, head int64
	}
	steps := []step{
		{name: "cold tag: one GET", ref: Reference{Name: "r.example/app:v1"}, want: "[linux/amd64]", gets: 1},
		{name: "warm tag: no call", ref: Reference{Name: "r.example/app:v1"}, want: "[linux/amd64]", gets: 1},
		{name: "by digest, known: no call", ref: Reference{Name: "r.example/app@" + first.String()}, want: "[linux/amd64]", gets: 1},
		{name: "pull policy Always: one HEAD, tag did not move", ref: Reference{Name: "r.example/app:v1", Refresh: true}, want: "[linux/amd64]", gets: 1, head: 1},
		{name: "tag moves, still fresh: old answer", act: func() { reg.push("r.example/app:v1", arm64) }, ref: Reference{Name: "r.example/app:v1"}, want: "[linux/amd64]", gets: 1, head: 1},
		{name: "pull policy Always sees the move: HEAD + GET by digest", ref: Reference{Name: "r.example/app:v1", Refresh: true}, want: "[linux/arm64]", gets: 2, head: 2},
		{name: "tag TTL over: HEAD, digest known", act: func() { clk.advance(2 * time.Minute) }, ref: Reference{Name: "r.example/app:v1"}, want: "[linux/arm64]", gets: 2, head: 3},
		{name: "old digest still answers", ref: Reference{Name: "r.example/app@" + first.String()}, want: "[linux/amd64]", gets: 2, head: 3},
		{name: "digest TTL over: GET again", act: func() { clk.advance(2 * time.Hour) }, ref: Reference{Name: "r.example/app@" + first.String()}, want: "[linux/amd64]", gets: 3, head: 3},
		{name: "short name normalized", act: func() { reg.push("docker.io/library/busybox:latest", amd64, arm64) }, ref: Reference{Name: "busybox"}, want: "[linux/amd64 linux/arm64]", gets: 4, head: 3},
		{name: "same image, full name: no call", ref: Reference{Name: "docker.io/library/busybox:latest"}, want: "[linux/amd64 linux/arm64]", gets: 4, head: 3},
	}
	for _, s := range steps {
		if s.act != nil {
			s.act()
		}
		ps, _, err := c.Architectures(ctx, s.ref, nil)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if fmt.Sprint(ps) != s.want {
			t.Errorf("%s: platforms %v, want %s", s.name, ps, s.want)
		}
		if reg.gets.Load() != s.gets || reg.heads.Load() != s.head {
			t.Errorf("%s: registry saw %d GETs and %d HEADs, want %d and %d", s.name, reg.gets.Load(), reg.heads.Load(), s.gets, s.head)
		}
	}
}

func TestCacheKeysIncludeCredentials(t *testing.T) {
	ctx := context.Background()
	reg := newFakeRegistry()
	d := reg.push("r.example/private:v1", arm64)
	reg.auth["r.example/private"] = "alice"
	c := NewCache(reg, CacheOptions{})
	alice := Auth{{Username: "alice", Password: "x"}}
	if _, _, err := c.Architectures(ctx, Reference{Name: "r.example/private:v1"}, alice); err != nil {
		t.Fatal(err)
	}
	// Neither anonymous access nor someone else's secret may be answered
	// from what alice's credentials found, by tag or by digest.
	for _, auth := range []Auth{nil, {{Username: "mallory"}}} {
		for _, name := range []string{"r.example/private:v1", "r.example/private@" + d.String()} {
			if _, _, err := c.Architectures(ctx, Reference{Name: name}, auth); err == nil {
				t.Errorf("%s with %v: answered from another credential's cache entry", name, auth)
			}
		}
	}
	// Errors are not cached.
	reg.auth["r.example/private"] = "mallory"
	if _, _, err := c.Architectures(ctx, Reference{Name: "r.example/private:v1"}, Auth{{Username: "mallory"}}); err != nil {
		t.Errorf("after access was granted: %v", err)
	}
}

// TestCacheSingleFlight runs in a synctest bubble, so that synctest.Wait
// says when every caller is blocked on the one registry call in flight.
func TestCacheSingleFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		reg := newFakeRegistry()
		reg.push("r.example/app:v1", amd64)
		reg.gate = make(chan struct{})
		c := NewCache(reg, CacheOptions{})
		const callers = 500
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for range callers {
			wg.Go(func() {
				ps, _, err := c.Architectures(ctx, Reference{Name: "r.example/app:v1"}, nil)
				if err == nil && fmt.Sprint(ps) != "[linux/amd64]" {
					err = fmt.Errorf("platforms %v", ps)
				}
				errs <- err
			})
		}
		// Every caller has reached the cache and waits: only then may the
		// one registry call end.
		synctest.Wait()
		close(reg.gate)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := reg.gets.Load() + reg.heads.Load(); got != 1 {
			t.Errorf("%d callers cost %d registry calls, want 1", callers, got)
		}
	})
}

func TestCacheCallerCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := newFakeRegistry()
		reg.push("r.example/app:v1", amd64)
		reg.gate = make(chan struct{})
		c := NewCache(reg, CacheOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, _, err := c.Architectures(ctx, Reference{Name: "r.example/app:v1"}, nil)
			done <- err
		}()
		// The caller waits on the registry call it started.
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled caller got %v", err)
		}
		// The shared call was not cancelled with its first caller: it
		// finishes and fills the cache for the next one.
		close(reg.gate)
		if _, _, err := c.Architectures(context.Background(), Reference{Name: "r.example/app:v1"}, nil); err != nil {
			t.Fatal(err)
		}
		if got := reg.gets.Load(); got != 1 {
			t.Errorf("registry GETs = %d, want 1", got)
		}
	})
}

func TestCacheLRUBound(t *testing.T) {
	ctx := context.Background()
	reg := newFakeRegistry()
	var lookups, hits int
	c := NewCache(reg, CacheOptions{Size: 3, OnLookup: func(_ string, hit bool) {
		lookups++
		if hit {
			hits++
		}
	}})
	for i := range 5 {
		reg.push(fmt.Sprintf("r.example/app%d:v1", i), amd64)
		if _, _, err := c.Architectures(ctx, Reference{Name: fmt.Sprintf("r.example/app%d:v1", i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if d, tg := c.Len(); d != 3 || tg != 3 {
		t.Errorf("cache holds %d digests and %d tags, want 3 and 3", d, tg)
	}
	// app4 is recent: a hit. app0 was evicted: a GET.
	before := reg.gets.Load()
	if _, _, err := c.Architectures(ctx, Reference{Name: "r.example/app4:v1"}, nil); err != nil {
		t.Fatal(err)
	}
	if reg.gets.Load() != before {
		t.Error("a recent entry was not served from the cache")
	}
	if _, _, err := c.Architectures(ctx, Reference{Name: "r.example/app0:v1"}, nil); err != nil {
		t.Fatal(err)
	}
	if reg.gets.Load() != before+1 {
		t.Error("the least recently used entry was not evicted")
	}
	if lookups == 0 || hits == 0 {
		t.Errorf("OnLookup saw %d lookups, %d hits", lookups, hits)
	}
}

// TestCacheDigest: resolving a reference costs at most a HEAD, never a GET,
// and shares the tag map with Architectures.
func TestCacheDigest(t *testing.T) {
	ctx := context.Background()
	reg := newFakeRegistry()
	clk := &clock{t: time.Unix(1000, 0)}
	c := NewCache(reg, CacheOptions{TagTTL: time.Minute, Now: clk.now})
	d := reg.push("r.example/app:v1", amd64, arm64)
	steps := []struct {
		name       string
		act        func()
		ref        Reference
		gets, head int64
	}{
		{name: "a digest names itself: no call", ref: Reference{Name: "r.example/app@" + d.String()}},
		{name: "cold tag: one HEAD", ref: Reference{Name: "r.example/app:v1"}, head: 1},
		{name: "fresh tag: no call", ref: Reference{Name: "r.example/app:v1"}, head: 1},
		{name: "Refresh: HEAD again", ref: Reference{Name: "r.example/app:v1", Refresh: true}, head: 2},
		{name: "tag TTL over: HEAD again", act: func() { clk.advance(2 * time.Minute) }, ref: Reference{Name: "r.example/app:v1"}, head: 3},
	}
	for _, s := range steps {
		if s.act != nil {
			s.act()
		}
		got, err := c.Digest(ctx, s.ref, nil)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got != d {
			t.Errorf("%s: digest %s, want %s", s.name, got, d)
		}
		if reg.gets.Load() != s.gets || reg.heads.Load() != s.head {
			t.Errorf("%s: registry saw %d GETs and %d HEADs, want %d and %d", s.name, reg.gets.Load(), reg.heads.Load(), s.gets, s.head)
		}
	}
	// The resolution serves Architectures too: the tag is fresh, so only
	// the digest's platforms are read (one GET by digest, no HEAD).
	if _, _, err := c.Architectures(ctx, Reference{Name: "r.example/app:v1"}, nil); err != nil {
		t.Fatal(err)
	}
	if reg.gets.Load() != 1 || reg.heads.Load() != 3 {
		t.Errorf("Architectures after Digest: %d GETs and %d HEADs, want 1 and 3", reg.gets.Load(), reg.heads.Load())
	}
	if _, err := c.Digest(ctx, Reference{Name: "r.example/app:v1@bad"}, nil); !Permanent(err) {
		t.Errorf("a malformed reference: %v, want a permanent error", err)
	}
}

// TestCachePurge: after a Purge (the registry configuration changed) every
// answer is asked again, and an answer fetched by a call begun before the
// Purge is not cached.
func TestCachePurge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		reg := newFakeRegistry()
		reg.push("r.example/app:v1", amd64)
		c := NewCache(reg, CacheOptions{})
		if _, _, err := c.Architectures(ctx, Reference{Name: "r.example/app:v1"}, nil); err != nil {
			t.Fatal(err)
		}
		c.Purge()
		if d, tags := c.Len(); d+tags != 0 {
			t.Fatalf("after Purge the cache holds %d digests and %d tags", d, tags)
		}
		// A call under way while the configuration changes.
		reg.gate = make(chan struct{})
		done := make(chan error)
		go func() {
			_, _, err := c.Architectures(ctx, Reference{Name: "r.example/app:v1"}, nil)
			done <- err
		}()
		synctest.Wait()
		c.Purge()
		close(reg.gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if d, tags := c.Len(); d+tags != 0 {
			t.Fatalf("an answer fetched before the Purge was cached: %d digests, %d tags", d, tags)
		}
		if _, _, err := c.Architectures(ctx, Reference{Name: "r.example/app:v1"}, nil); err != nil {
			t.Fatal(err)
		}
		if got := reg.gets.Load(); got != 3 {
			t.Errorf("registry GETs = %d, want 3 (one per configuration)", got)
		}
	})
}
