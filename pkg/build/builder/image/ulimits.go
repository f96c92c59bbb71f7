package image

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// pinnedLimits are the resource limits given to build steps at the value
// the builder itself may raise them to. Left alone, buildah sets nofile
// and nproc to 1048576 for root, which needs CAP_SYS_RESOURCE when the
// current hard limit is lower (as in build pods and on archway's machines).
var pinnedLimits = []struct {
	name     string
	resource int
}{
	{"nofile", unix.RLIMIT_NOFILE},
	{"nproc", unix.RLIMIT_NPROC},
}

// hardLimitUlimits returns buildah ulimit options ("nofile=N:N") that set
// the soft and hard limits of build steps to the builder's current hard
// limits.
func hardLimitUlimits() ([]string, error) {
	out := make([]string, 0, len(pinnedLimits))
	for _, l := range pinnedLimits {
		var lim unix.Rlimit
		if err := unix.Getrlimit(l.resource, &lim); err != nil {
			return nil, fmt.Errorf("reading the %s limit: %w", l.name, err)
		}
		out = append(out, ulimitOption(l.name, lim.Max))
	}
	return out, nil
}

// ulimitOption formats a buildah ulimit option with equal soft and hard
// limits; unlimited is -1.
func ulimitOption(name string, limit uint64) string {
	if limit == unix.RLIM_INFINITY {
		return fmt.Sprintf("%s=-1:-1", name)
	}
	return fmt.Sprintf("%s=%d:%d", name, limit, limit)
}
