// Command pause is the sandbox ("pause") container of the test bed's real
// node: it holds a pod's namespaces open, reaps the zombies it inherits as
// the pod's PID 1 when the pod shares its process namespace, and exits when
// the runtime stops it. The bed builds it and pushes it as a one-file image
// that containerd pulls as its sandbox image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
