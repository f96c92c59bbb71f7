package image

import (
	"context"
	"fmt"
	"time"

	"github.com/archway-build/archway/pkg/platform"
	"github.com/archway-build/archway/pkg/registry"
)

// Output is what building, pushing and reading back one platform's image
// gave.
type Output struct {
	// Build is the built image in the store.
	Build Result
	// PostCommit is how long the post-commit hook ran; zero for none.
	PostCommit time.Duration
	// Pushed is the push; zero when there was no destination.
	Pushed Pushed
	// Image is the pushed image as the registry has it; zero when there
	// was no destination.
	Image Image
	// Duration is how long the whole took.
	Duration time.Duration
}

// PlatformMismatchError says that the pushed image's config records
// another platform than the one it was built for.
type PlatformMismatchError struct {
	// Reference is the pushed image, by digest.
	Reference string
	// Want is the target platform; Have is what the image's config says.
	Want, Have platform.Platform
}

func (e *PlatformMismatchError) Error() string {
	return fmt.Sprintf("the image pushed as %s records platform %q in its config, not the target platform %s",
		e.Reference, e.Have.String(), e.Want.String())
}

// BuildAndPush builds req, runs its post-commit hook in the image, pushes
// the image to dest with pushAuth and reads it back from the registry, failing with a *PlatformMismatchError (in a
// *StageError with StageInspect) when the registry's copy says another
// platform. With an empty dest the image is only built.
func (b *Builder) BuildAndPush(ctx context.Context, req Request, dest string, pushAuth registry.AuthFile) (Output, error) {
	start := time.Now()
	var out Output
	if dest != "" {
		sys, err := b.systemContext([]string{dest}, pushAuth)
		if err == nil {
			err = registry.CheckBlocked(sys, dest, true)
		}
		if err != nil {
			return out, &StageError{Stage: StagePush, Err: err}
		}
	}
	var err error
	if out.Build, err = b.build(ctx, req, resultStoreFor(req, dest)); err != nil {
		return out, err
	}
	if req.PostCommit != nil {
		if out.PostCommit, err = b.runPostCommit(ctx, out.Build.ImageID, *req.PostCommit, req.Env, req.Out); err != nil {
			return out, &StageError{Stage: StagePostCommit, Err: err}
		}
	}
	if dest == "" {
		out.Duration = time.Since(start)
		return out, nil
	}
	if out.Build.unlabelled {
		if err := b.pushWithLabels(ctx, req, dest, pushAuth, &out); err != nil {
			return out, err
		}
		out.Duration = time.Since(start)
		return out, nil
	}
	if prev := out.Build.pushed; prev != nil && registryRepository(prev.Reference) == registryRepository(dest) {
		// The same image is in dest's repository already: tag it.
		pushStart := time.Now()
		if err := b.retag(ctx, *prev, dest, pushAuth); err == nil {
			out.Pushed = Pushed{Reference: dest, Digest: prev.Digest, Duration: time.Since(pushStart)}
			out.Image = *prev
			out.Duration = time.Since(start)
			return out, nil
		} else if ctx.Err() != nil {
			return out, &StageError{Stage: StagePush, Err: contextErr(ctx, err)}
		}
		// The registry lost it: push it again.
	}
	if out.Pushed, err = b.Push(ctx, out.Build.ImageID, dest, req.Format, pushAuth, req.Out); err != nil {
		return out, err
	}
	if out.Image, err = b.Inspect(ctx, digestReference(dest, out.Pushed.Digest), pushAuth); err != nil {
		return out, &StageError{Stage: StageInspect, Err: err}
	}
	if err := CheckPushedPlatform(out.Build.Platform, out.Image); err != nil {
		return out, &StageError{Stage: StageInspect, Err: err}
	}
	if out.Build.resultKey != "" {
		pushed := out.Image
		b.saveResult(out.Build.resultKey, resultRecord{ImageID: out.Build.ImageID, Pushed: &pushed})
	}
	out.Duration = time.Since(start)
	return out, nil
}

// retag tags img, an image pushed before to dest's repository, as dest.
func (b *Builder) retag(ctx context.Context, img Image, dest string, auth registry.AuthFile) error {
	sys, err := b.systemContext([]string{dest}, auth)
	if err != nil {
		return err
	}
	return retag(ctx, sys, img, dest)
}

// CheckPushedPlatform returns a *PlatformMismatchError when the config of
// img, an image as the registry has it, records another platform than
// want, the platform it was built for. An image config that leaves the
// variant out matches any variant of want's architecture.
func CheckPushedPlatform(want platform.Platform, img Image) error {
	have := platform.FromOCI(img.Platform)
	if platform.Matches(want, have) {
		return nil
	}
	return &PlatformMismatchError{Reference: img.Reference, Want: want, Have: have}
}

// digestReference returns ref's repository with digest instead of its tag.
func digestReference(ref, digest string) string {
	named := registryRepository(ref)
	if named == "" {
		return ref
	}
	return named + "@" + digest
}
