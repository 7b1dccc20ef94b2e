// Command restarter stands for a node's "restart containerd" command in
// nodeinstall's tests: it appends its arguments to /restarts in the root
// it runs in, so a test sees that the command ran, how often, and where.
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	f, err := os.OpenFile("/restarts", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err == nil {
		_, err = fmt.Fprintln(f, strings.Join(os.Args[1:], " "))
		f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if len(os.Args) > 1 && os.Args[1] == "fail" {
		fmt.Fprintln(os.Stderr, "containerd did not come back")
		os.Exit(3)
	}
}
