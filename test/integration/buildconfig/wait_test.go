package buildconfig

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/archway-build/archway/test/bed"
)

func waitPoll(ctx context.Context, cond func() bool) error {
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, bed.DefaultTimeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
}
