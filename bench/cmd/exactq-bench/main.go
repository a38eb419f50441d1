// Command exactq-bench is the whole-system benchmark driver (package bench): it produces
// and consumes through franz-go against a running cluster or an exactq it starts itself,
// and prints a Markdown table. Run it with -h for flags.
//
// It is a binary of its own so the broker binary (cmd/exactq) links none of the driver,
// its charts (golang.org/x/image) or its Maven launcher for Apache Kafka (bench/kafka).
package main

import (
	"os"
	"strings"

	"github.com/exactq/exactq/bench/internal/driver"
)

func main() { os.Exit(driver.Main(benchArgs(os.Args[1:]), os.Stdout, os.Stderr)) }

// benchArgs accepts -b/--b as bench's -brokers, as exactq's client commands do. bench keeps
// its own default (no -brokers: it starts exactq itself), so none is added.
func benchArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		switch {
		case a == "-b" || a == "--b":
			a = "-brokers"
		case strings.HasPrefix(a, "-b=") || strings.HasPrefix(a, "--b="):
			a = "-brokers=" + a[strings.Index(a, "=")+1:]
		}
		out = append(out, a)
	}
	return out
}
