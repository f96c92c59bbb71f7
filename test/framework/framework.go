// Package framework is the one harness of archway's bed suites (the
// integration suites of test/integration and the e2e suites): a suite's
// TestMain starts its bed with Run, each case gets a namespace of its own
// from Suite.NewCase, controllers under test run in a manager started by
// StartManager, and every wait is bounded by one of the bed's named
// timeouts (test/bed/timeouts.go).
package framework

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/archway-build/archway/test/bed"
)

// Suite is what a package's tests share: one bed, a scheme with
// Kubernetes', archway's and the suite's API types, and a client (no
// cache) with that scheme.
type Suite struct {
	Bed    *bed.Bed
	Scheme *runtime.Scheme
	Client client.Client
}

// Options describe a suite.
type Options struct {
	// Name names the suite in the messages of a failed start.
	Name string
	// Bed are the bed's parts.
	Bed bed.Options
	// AddToScheme register API types beyond bed.NewScheme's.
	AddToScheme []func(*runtime.Scheme) error
	// Before runs before the bed starts (checks of the machine, binaries
	// to build), bounded by bed.StartTimeout.
	Before func(ctx context.Context) error
	// Setup runs once the bed is up, before the tests: it keeps what the
	// tests need and starts what they share. Its ctx lives until the
	// tests have ended; teardown (nil for none) runs then, before the bed
	// stops.
	Setup func(ctx context.Context, s *Suite) (teardown func(), err error)
	// AfterFailure runs when a test failed, before teardown: to show the
	// log of a program under test.
	AfterFailure func()
	// QuietLogs discards controller-runtime's log (every part of the bed
	// logs to a file in its directory); without it errors are logged to
	// stderr (see bed.SetTestLogger).
	QuietLogs bool
}

// Run starts the suite, runs its tests and stops it; its result is the
// exit code of TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(framework.Run(m, opts)) }
func Run(m *testing.M, opts Options) int {
	if opts.QuietLogs {
		logf.SetLogger(logr.Discard())
	} else {
		bed.SetTestLogger()
	}
	name := opts.Name
	if name == "" {
		name = "suite"
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startCtx, cancelStart := context.WithTimeout(ctx, bed.StartTimeout)
	defer cancelStart()
	if opts.Before != nil {
		if err := opts.Before(startCtx); err != nil {
			return fail(err)
		}
	}
	b, err := bed.Start(startCtx, opts.Bed)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err := b.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: stopping the bed: %v\n", name, err)
		}
	}()
	s := &Suite{Bed: b, Scheme: bed.NewScheme()}
	for _, add := range opts.AddToScheme {
		if err := add(s.Scheme); err != nil {
			return fail(err)
		}
	}
	if s.Client, err = client.New(b.Config, client.Options{Scheme: s.Scheme}); err != nil {
		return fail(err)
	}
	if opts.Setup != nil {
		teardown, err := opts.Setup(ctx, s)
		if teardown != nil {
			// Before the bed goes (with the certificates of webhooks).
			defer teardown()
		}
		if err != nil {
			return fail(err)
		}
	}
	code := m.Run()
	if code != 0 && opts.AfterFailure != nil {
		opts.AfterFailure()
	}
	return code
}

// ServeImageStreams has the suite's apiserver serve OpenShift's image
// streams (bed.Bed.ServeImageStreams) until the test ends.
func (s *Suite) ServeImageStreams(t testing.TB, ctx context.Context) {
	t.Helper()
	remove, err := s.Bed.ServeImageStreams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := remove(); err != nil {
			t.Error(err)
		}
	})
}
