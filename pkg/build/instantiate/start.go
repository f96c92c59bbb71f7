package instantiate

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// ErrPaused is returned for a BuildConfig annotated
// openshift.io/build-config.paused=true, which starts no build.
var ErrPaused = errors.New("the BuildConfig is paused (annotation " + buildv1.BuildConfigPausedAnnotation + "=true)")

// ErrLastVersionMismatch is returned when Request.LastVersion is not the
// BuildConfig's status.lastVersion.
var ErrLastVersionMismatch = errors.New("the BuildConfig has started other builds meanwhile")

// The RBAC this code needs is written, each rule with its reason, in
// manifests/build-controller/rbac/role.yaml and
// manifests/build-triggers/rbac/role.yaml
// (TestInstall in test/e2e/install shows each is needed).

// Starter starts Builds from BuildConfigs.
//
// Numbering is race-safe across any number of Starters and processes: the
// next number is taken by raising status.lastVersion with an update that
// carries the resourceVersion read (optimistic locking), and only then is
// the Build created under that number. Concurrent starts conflict and
// retry, so each number goes to exactly one of them and lastVersion ends
// equal to the highest. Within one Starter, starts of one BuildConfig wait
// for each other (striped locks), so only starts from other processes
// conflict.
type Starter struct {
	// Client creates Builds and updates buildconfigs/status.
	Client client.Client
	// Reader reads BuildConfigs. A live reader (not a cache) keeps
	// conflicts to real races; default Client.
	Reader client.Reader
	// Metrics counts the builds started (nil: not counted).
	Metrics *Metrics

	locks [64]sync.Mutex
}

// NewStarter returns a Starter writing with c and reading with r (nil: c).
func NewStarter(c client.Client, r client.Reader) *Starter {
	if r == nil {
		r = c
	}
	return &Starter{Client: c, Reader: r}
}

// maxAttempts bounds the retries of one start against concurrent starts
// elsewhere and against build names taken already.
const maxAttempts = 100

// Start creates the next Build of BuildConfig namespace/name for req and
// returns it. A request that changes the platform lists is first checked by
// the apiserver (a dry-run create), so it is refused with the API's own
// messages before a number is taken. The errors are the apiserver's (e.g.
// NotFound for a missing BuildConfig), ErrPaused, or CheckStrategyOptions'.
func (s *Starter) Start(ctx context.Context, namespace, name string, req Request) (*buildv1.Build, error) {
	return s.start(ctx, namespace, name, req, func(bc *buildv1.BuildConfig, n int64) *buildv1.Build {
		return NewBuild(bc, n, req)
	})
}

// ErrNotFromBuildConfig is returned by Clone for a Build that no
// BuildConfig started: there is no number to give its copy.
var ErrNotFromBuildConfig = errors.New("the build was not started from a BuildConfig")

// ErrBinaryClone is returned by Clone for a binary build: its input's tag
// goes when the build ends, after which the registry may delete it, so a
// copy could not be sure to read it (as in OpenShift, which keeps no
// binary input at all).
var ErrBinaryClone = errors.New("the build is a binary build, whose input is not kept once it ends: upload the input again")

// Clone starts Build namespace/name again (oc start-build --from-build):
// the next Build of its BuildConfig, with its spec (NewClone) and req's
// changes, numbered as Start numbers. The errors are Start's, NotFound
// for a missing Build, ErrNotFromBuildConfig or ErrBinaryClone.
func (s *Starter) Clone(ctx context.Context, namespace, name string, req Request) (*buildv1.Build, error) {
	src := &buildv1.Build{}
	if err := s.reader().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, src); err != nil {
		return nil, err
	}
	bcName := src.Annotations[buildv1.BuildConfigAnnotation]
	if bcName == "" {
		return nil, fmt.Errorf("build %s/%s: %w", namespace, name, ErrNotFromBuildConfig)
	}
	if src.Spec.Source.Type == buildv1.BuildSourceBinary || src.Spec.Source.Binary != nil {
		return nil, fmt.Errorf("build %s/%s: %w", namespace, name, ErrBinaryClone)
	}
	return s.start(ctx, namespace, bcName, req, func(bc *buildv1.BuildConfig, n int64) *buildv1.Build {
		return NewClone(bc, src, n, req)
	})
}

func (s *Starter) reader() client.Reader {
	if s.Reader == nil {
		return s.Client
	}
	return s.Reader
}

// start takes the next number of BuildConfig namespace/name and creates the
// Build newBuild makes for it.
func (s *Starter) start(ctx context.Context, namespace, name string, req Request, newBuild func(*buildv1.BuildConfig, int64) *buildv1.Build) (*buildv1.Build, error) {
	mu := s.lock(namespace, name)
	mu.Lock()
	defer mu.Unlock()
	reader := s.reader()
	dryRunDone := !req.overridesPlatforms()
	b, err := backoff.Retry(ctx, func() (*buildv1.Build, error) {
		bc := &buildv1.BuildConfig{}
		if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, bc); err != nil {
			return nil, backoff.Permanent(err)
		}
		if bc.Annotations[buildv1.BuildConfigPausedAnnotation] == "true" {
			return nil, backoff.Permanent(ErrPaused)
		}
		if req.LastVersion != nil && *req.LastVersion != bc.Status.LastVersion {
			return nil, backoff.Permanent(fmt.Errorf("%w: the request's lastVersion is %d, the BuildConfig's %d", ErrLastVersionMismatch, *req.LastVersion, bc.Status.LastVersion))
		}
		n := bc.Status.LastVersion + 1
		candidate := newBuild(bc, n)
		if err := CheckStrategyOptions(candidate.Spec.Strategy, req); err != nil {
			return nil, backoff.Permanent(err)
		}
		if !dryRunDone {
			err := s.Client.Create(ctx, candidate.DeepCopy(), client.DryRunAll)
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return nil, backoff.Permanent(err)
			}
			dryRunDone = true
		}
		bc.Status.LastVersion = n
		if req.ImageChangeTriggers != nil {
			bc.Status.ImageChangeTriggers = req.ImageChangeTriggers
		}
		if err := s.Client.Status().Update(ctx, bc); err != nil {
			if apierrors.IsConflict(err) {
				return nil, errNumberTaken // another start took n: read again
			}
			return nil, backoff.Permanent(err)
		}
		if err := s.Client.Create(ctx, candidate); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// A Build of that name exists (lastVersion was behind it,
				// e.g. restored from a backup): take the next number.
				return nil, errNumberTaken
			}
			return nil, backoff.Permanent(fmt.Errorf("creating build %s/%s: %w", namespace, candidate.Name, err))
		}
		s.Metrics.observe(&req)
		return candidate, nil
	}, startBackoff()...)
	if errors.Is(err, errNumberTaken) {
		return nil, fmt.Errorf("starting a build of %s/%s: gave up after %d attempts against concurrent starts", namespace, name, maxAttempts)
	}
	return b, err
}

// errNumberTaken is a start's attempt that found its number taken: it
// reads the BuildConfig again.
var errNumberTaken = errors.New("the build number was taken")

// firstDelay and maxDelay space a start's attempts: firstDelay apart at
// first, growing to maxDelay (variables for the tests).
var firstDelay, maxDelay = 5 * time.Millisecond, 200 * time.Millisecond

// startBackoff spaces a start's attempts from firstDelay to maxDelay,
// maxAttempts in all. (wait.Backoff cannot say this: its Cap ends the
// retries when the delay reaches it, after ten attempts here, which twenty
// simultaneous starts of one BuildConfig could use up.)
func startBackoff() []backoff.RetryOption {
	return []backoff.RetryOption{
		backoff.WithBackOff(&backoff.ExponentialBackOff{
			InitialInterval:     firstDelay,
			RandomizationFactor: 0.5,
			Multiplier:          1.5,
			MaxInterval:         maxDelay,
		}),
		backoff.WithMaxTries(maxAttempts),
		backoff.WithMaxElapsedTime(0),
	}
}

// Check is what Start does before it takes a number, without starting:
// the BuildConfig must exist and not be paused, and the Build req makes is
// checked by the apiserver with a dry-run create, so a caller that must do
// costly work before Start (an upload) refuses bad input first. The errors
// are Start's.
func (s *Starter) Check(ctx context.Context, namespace, name string, req Request) (*buildv1.BuildConfig, error) {
	bc := &buildv1.BuildConfig{}
	if err := s.reader().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, bc); err != nil {
		return nil, err
	}
	if bc.Annotations[buildv1.BuildConfigPausedAnnotation] == "true" {
		return nil, ErrPaused
	}
	candidate := NewBuild(bc, bc.Status.LastVersion+1, req)
	if err := CheckStrategyOptions(candidate.Spec.Strategy, req); err != nil {
		return nil, err
	}
	if err := s.Client.Create(ctx, candidate, client.DryRunAll); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	return bc, nil
}

func (s *Starter) lock(namespace, name string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace + "/" + name))
	return &s.locks[h.Sum32()%uint32(len(s.locks))]
}
