// Command exactq is the exactq broker and its command-line tools.
package main

import (
	"fmt"
	"os"
)

const usage = `exactq: a Kafka-wire-compatible broker with exactly-once share groups

Usage:
  exactq serve [flags]        run a broker (zero config: ./exactq-data, 127.0.0.1:9092)

Run "exactq <command> -h" for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = runServe(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "exactq: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "exactq %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
