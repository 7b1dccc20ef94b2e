// Command pause is the CRI sandbox ("pause") program of the tests' locally
// built pause image: it holds the pod's namespaces, reaps children that end
// up with it (it is PID 1 of a pod sharing a PID namespace), and exits 0 on
// SIGINT or SIGTERM. Build it static: CGO_ENABLED=0 go build.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
