package image

import (
	"context"
	"fmt"
	"time"
)

// resultStore is where a build's result is kept for a later build of the
// same inputs, which reuses it instead of building: the work directory
// (workDirResults, Request.ReuseResults) or the layer cache's repository
// (cacheRepoResults, for a build BuildAndPush pushes).
type resultStore interface {
	// key returns the key of req's result by the store's rules, "" when
	// the build reads something the key cannot see.
	key(req Request, in keyedBuild) (string, error)
	// tag is where the layer cache keeps the result of key, "" for a
	// store that is not the layer cache.
	tag(p *platformBuild, key string) string
	// find returns the result kept for p.key, reused, and whether there
	// is one usable (a miss is said in p.out).
	find(ctx context.Context, b *Builder, p *platformBuild) (Result, bool, error)
	// keep keeps image id as the result of key once it is built.
	keep(b *Builder, key, id string)
}

// resultStoreFor is where the result of req, pushed to dest ("" when it
// is only built), is kept: in the layer cache's repository when it is
// pushed with a layer cache and no post-commit hook (the hook runs in an
// image of the store, which a result of the layer cache is not), else in
// the work directory when req.ReuseResults, else nowhere (nil).
func resultStoreFor(req Request, dest string) resultStore {
	switch {
	case dest != "" && req.Cache != nil && req.PostCommit == nil:
		return cacheRepoResults{}
	case req.ReuseResults:
		return workDirResults{}
	}
	return nil
}

// workDirResults keeps each result as a record of the image in the work
// directory (result.go); a reused image pushed before to the destination's
// repository is only tagged there.
type workDirResults struct{}

func (workDirResults) key(req Request, in keyedBuild) (string, error) { return resultKey(req, in) }

func (workDirResults) tag(*platformBuild, string) string { return "" }

func (workDirResults) find(_ context.Context, b *Builder, p *platformBuild) (Result, bool, error) {
	rec := b.loadResult(p.key)
	if rec == nil {
		return Result{}, false, nil
	}
	_, _ = fmt.Fprintf(p.out, "Reusing image %s: built before in this work directory from the same Dockerfile, context, "+
		"build args and base images\n", shortImageID(rec.ImageID))
	return Result{ImageID: rec.ImageID, Platform: p.target, Duration: time.Since(p.start), Reused: true,
		resultKey: p.key, pushed: rec.Pushed}, true, nil
}

func (workDirResults) keep(b *Builder, key, id string) { b.saveResult(key, resultRecord{ImageID: id}) }

// cacheRepoResults keeps each result, without Request.Labels, in the
// layer cache's repository under a tag of its key (cachedresult.go): the
// build leaves the labels out and the push applies them, so that every
// build of the same inputs has the same result. BuildAndPush keeps it
// there when it pushes.
type cacheRepoResults struct{}

func (cacheRepoResults) key(req Request, in keyedBuild) (string, error) {
	req.Labels = nil
	return resultKey(req, in)
}

func (cacheRepoResults) tag(p *platformBuild, key string) string {
	return p.cacheRepo.Name() + ":" + cachedResultTag(key)
}

func (cacheRepoResults) find(ctx context.Context, b *Builder, p *platformBuild) (Result, bool, error) {
	hit := b.findCachedResult(ctx, p.req, p.cacheTag, p.target, p.out)
	if hit == nil {
		return Result{}, false, nil
	}
	return Result{Platform: p.target, Duration: time.Since(p.start), Reused: true, resultKey: p.key,
		unlabelled: true, cacheTag: p.cacheTag, cached: hit}, true, nil
}

func (cacheRepoResults) keep(*Builder, string, string) {}
