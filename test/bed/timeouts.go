package bed

import "time"

// The named timeouts of every bed suite: how long a wait may take, by the
// kind of thing awaited. A suite picks a name, never a figure of its own, so
// that a slow machine is fixed here, in one place.
const (
	// DefaultTimeout bounds one wait for what the bed's apiserver, kwok or
	// a controller under test does promptly: an object appearing or
	// changing, a pod bound, a reconcile of the object as it is now.
	DefaultTimeout = 30 * time.Second
	// LongTimeout bounds a wait that spans several steps of a controller or
	// of the apiserver's informers: RBAC reaching the authorizer, a
	// trigger's polls of a registry, a chain of builds.
	LongTimeout = time.Minute
	// CaseTimeout bounds one test case of a bed suite, all its waits
	// together.
	CaseTimeout = 3 * time.Minute
	// BuildTimeout bounds a wait for real builds to end: buildah building
	// a four-platform Build through its pods (the foreign platforms under
	// qemu on a shared 2-core machine), a builder run, an image pushed for
	// every platform.
	BuildTimeout = 10 * time.Minute
	// StartTimeout bounds starting a suite: its bed, and what it sets up
	// before its tests (images pushed, binaries built, webhooks served).
	StartTimeout = 10 * time.Minute
	// Interval is how often the waits poll.
	Interval = 20 * time.Millisecond
)
