// Command emulation-setup is what the binfmt DaemonSet (manifests/emulation)
// runs on each node: it registers qemu's user-mode handlers with the
// kernel's binfmt_misc (machine-wide, so it needs a privileged container),
// then keeps the node's labels emulation.archway.dev/<arch>=true in step
// with the handlers that are registered, enabled and hold the F flag,
// looking again every --interval. Build pods of a platform built under
// emulation select that label, so none lands on a node without the
// handler. On SIGTERM it removes the labels (nothing keeps them true once
// it stops); it never unregisters a handler.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/archway-build/archway/pkg/emulation"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "emulation-setup:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		node     = flag.String("node-name", os.Getenv("NODE_NAME"), "the node this runs on (default $NODE_NAME, from the downward API)")
		dir      = flag.String("binfmt-dir", emulation.BinfmtDir, "where binfmt_misc is mounted (mounted there when it is not)")
		confDir  = flag.String("conf-dir", emulation.ConfDir, "qemu-user-static's registration lines, qemu-<name>.conf")
		register = flag.String("register", "", "comma-separated architectures whose qemu handler to register when missing (e.g. arm,arm64,riscv64); empty registers none and only labels")
		interval = flag.Duration("interval", time.Minute, "how often to look at the handlers again")
		once     = flag.Bool("once", false, "register and label once, then exit (the labels stay)")
	)
	flag.Parse()
	if *node == "" {
		return errors.New("--node-name (or $NODE_NAME) is required")
	}
	var requested []string
	for _, a := range strings.Split(*register, ",") {
		if a = strings.TrimSpace(a); a != "" {
			requested = append(requested, a)
		}
	}
	archs, skipped, err := emulation.Registrable(*confDir, runtime.GOARCH, requested)
	if err != nil {
		return fmt.Errorf("--register: %w", err)
	}
	if len(skipped) > 0 {
		fmt.Printf("not registering %s\n", strings.Join(skipped, ", "))
	}
	cfg, err := config.GetConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if err := mountBinfmt(*dir); err != nil {
		return err
	}
	sync := func() error {
		if len(archs) > 0 {
			done, err := emulation.Register(*dir, *confDir, archs)
			if len(done) > 0 {
				fmt.Printf("registered the qemu handlers of %s\n", strings.Join(done, ", "))
			}
			if err != nil {
				return err
			}
		}
		registered, err := emulation.Sync(ctx, c, *node, *dir)
		if err != nil {
			return err
		}
		var have []string
		for a := range registered {
			have = append(have, a)
		}
		slices.Sort(have)
		fmt.Printf("node %s emulates %v\n", *node, have)
		return nil
	}
	if *once {
		return sync()
	}
	for {
		if err := sync(); err != nil {
			// Leave no label that may be wrong, and say why.
			fmt.Fprintln(os.Stderr, "emulation-setup:", err)
			if cerr := emulation.Clear(ctx, c, *node); cerr != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "emulation-setup:", cerr)
			}
		}
		select {
		case <-ctx.Done():
			clearCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return emulation.Clear(clearCtx, c, *node)
		case <-time.After(*interval):
		}
	}
}

// mountBinfmt mounts binfmt_misc at dir when it is not mounted there (a
// container's /proc/sys/fs/binfmt_misc often is not).
func mountBinfmt(dir string) error {
	if _, err := os.Stat(dir + "/status"); err == nil {
		return nil
	}
	if err := unix.Mount("binfmt_misc", dir, "binfmt_misc", 0, ""); err != nil {
		return fmt.Errorf("mounting binfmt_misc at %s (the container must be privileged): %w", dir, err)
	}
	return nil
}
