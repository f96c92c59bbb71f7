package framework

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/archway-build/archway/test/bed"
)

// Poll calls cond every bed.Interval until it returns true or an error, or
// timeout (a named timeout of test/bed/timeouts.go) or ctx ends.
func Poll(ctx context.Context, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, bed.Interval, timeout, true, cond)
}
