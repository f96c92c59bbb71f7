package framework

import (
	"context"
	"fmt"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ManagerOptions are the options of a manager a test starts: the suite's
// scheme, no metrics or health listeners, and a cache of the namespaces
// given (every namespace if none).
func (s *Suite) ManagerOptions(namespaces ...string) ctrl.Options {
	opts := ctrl.Options{
		Scheme:                 s.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	}
	if len(namespaces) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// Manager is a controller-runtime manager running in the test's process.
type Manager struct {
	ctrl.Manager
	name   string
	cancel context.CancelFunc
	done   chan error
}

// StartManager makes a manager with opts on the suite's bed, lets setup add
// the controllers under test (its ctx is the manager's: it ends when the
// manager stops) and starts it. The manager stops when t ends, or at Stop.
// name names it in the error it stops with.
func (s *Suite) StartManager(t testing.TB, name string, opts ctrl.Options, setup func(context.Context, ctrl.Manager) error) *Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(s.Bed.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{Manager: mgr, name: name, cancel: cancel, done: make(chan error, 1)}
	if err := setup(ctx, mgr); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { m.done <- mgr.Start(ctx) }()
	t.Cleanup(m.Stop)
	return m
}

// Stop stops the manager and waits until it has stopped. It may be called
// more than once.
func (m *Manager) Stop() {
	if m.cancel == nil {
		return
	}
	m.cancel()
	if err := <-m.done; err != nil {
		fmt.Fprintf(os.Stderr, "%s stopped: %v\n", m.name, err)
	}
	m.cancel = nil
}
