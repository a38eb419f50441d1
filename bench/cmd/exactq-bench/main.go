// Command exactq-bench is the whole-system benchmark driver (package bench): it produces
// and consumes through franz-go against a running cluster or an exactq it starts itself,
// and prints a Markdown table. Run it with -h for flags.
package main

import (
	"os"

	"github.com/exactq/exactq/bench"
)

func main() { os.Exit(bench.Main(os.Args[1:], os.Stdout, os.Stderr)) }
