// Command exactq is the exactq broker and its command-line tools.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

const usage = `exactq: a Kafka-wire-compatible broker with exactly-once share groups

Usage:
  exactq serve [flags]        run a broker (zero config: ./exactq-data, 127.0.0.1:9092)
  exactq topic create|list|describe|delete|alter ...
                              manage topics
  exactq group list|describe|delete ...
                              list, describe (members, offsets, lag) and delete groups
  exactq share consume|describe|list ...
                              consume from share groups (queues), describe their members,
                              start offsets, lag and in-flight records
  exactq txn list|describe ...
                              list and describe transactional ids
  exactq produce TOPIC        produce stdin lines as records
  exactq consume TOPIC        print records to stdout
  exactq version              print the version

Client commands take -b/--brokers host:port[,...] (default 127.0.0.1:9092).
Run "exactq <command> -h" for a command's flags.
`

// command is a client subcommand, runnable in-process by tests. ctx is cancelled on
// SIGINT or SIGTERM.
type command func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error

var commands = map[string]command{
	"topic":   runTopic,
	"group":   runGroup,
	"share":   runShare,
	"txn":     runTxn,
	"produce": runProduce,
	"consume": runConsume,
	"version": runVersion,
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	switch name {
	case "serve":
		if err := runServe(args); err != nil && !errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "exactq serve: %v\n", err)
			os.Exit(1)
		}
		return
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	}
	run, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "exactq: unknown command %q\n\n%s", name, usage)
		os.Exit(2)
	}
	// The first signal cancels ctx (consume and produce stop cleanly); stop() then restores
	// the default handling so a second one kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(exitCode(name, run(ctx, args, os.Stdin, os.Stdout, os.Stderr), os.Stderr))
}

// exitCode prints err and returns the process exit code: 0 on success or -h, 2 for a
// usage error, 1 for any other failure.
func exitCode(name string, err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		if ue.cmd != "" {
			name = ue.cmd
		}
		fmt.Fprintf(stderr, "exactq %s: %v\nRun \"exactq %s -h\" for usage.\n", name, err, name)
		return 2
	default:
		fmt.Fprintf(stderr, "exactq %s: %v\n", name, err)
		return 1
	}
}
