// Command exactq is the exactq broker and its command-line tools.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
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
  exactq cluster status|add-voter|remove-voter ...
                              describe the metadata quorum, add and remove voters
  exactq produce TOPIC        produce stdin lines as records
  exactq consume TOPIC        print records to stdout
  exactq version              print the version
  exactq completion bash|zsh|fish|powershell
                              print a shell completion script

Client commands take -b/--brokers host:port[,...] (default 127.0.0.1:9092); cluster
takes --bootstrap-controller HOST:PORT (a controller listener).
Run "exactq <command> --help" (or -h) for a command's flags.
`

// command is a client subcommand, runnable in-process by tests. ctx is cancelled on
// SIGINT or SIGTERM.
type command func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error

// clientCommand is a top-level client command with, for a family (topic, group, ...), its
// subcommands.
type clientCommand struct {
	name, short string
	run         command
	subs        []subcommand
}

var clientCommands = []clientCommand{
	{"topic", "create, list, describe, delete and alter topics", runTopic, topicCommands},
	{"group", "list, describe and delete consumer groups", runGroup, groupCommands},
	{"share", "consume from share groups, describe, list and reset them", runShare, shareCommands},
	{"txn", "list and describe transactional ids", runTxn, txnCommands},
	{"cluster", "describe the metadata quorum, add and remove voters", runCluster, clusterCommands},
	{"produce", "produce stdin lines as records", runProduce, nil},
	{"consume", "print records to stdout", runConsume, nil},
	{"version", "print the version", runVersion, nil},
}

func main() {
	// The first signal cancels ctx (consume and produce stop cleanly); stop() then restores
	// the default handling so a second one kills the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// execute runs the command line args and returns the exit code: 0 on success or --help, 2
// for a usage error (an unknown command or flag, missing arguments), 1 for any other failure.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ran := false // a command's own code ran; an error before that is cobra's, a usage error
	root := newRootCmd(stdin, stdout, stderr, &ran)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	name := ""
	if cmd != nil && cmd != root {
		name = cmd.CommandPath()[len(root.Name())+1:]
	}
	if err != nil && !ran {
		var ue *usageError
		if !errors.As(err, &ue) {
			err = &usageError{msg: err.Error()}
		}
	}
	return exitCode(name, err, stderr)
}

// newRootCmd is the command tree on cobra: serve with its flags, the client commands (each
// parses its own flags with pflag, so DisableFlagParsing), and cobra's completion command.
func newRootCmd(stdin io.Reader, stdout, stderr io.Writer, ran *bool) *cobra.Command {
	root := &cobra.Command{
		Use:           "exactq",
		Short:         "a Kafka-wire-compatible broker with exactly-once share groups",
		Long:          usage,
		SilenceErrors: true, // execute prints errors, with the exit codes above
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprint(stderr, usage)
			return usagef("missing command")
		},
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// exactq's own help is the usage text above; serve and completion keep cobra's, which
	// lists their flags.
	root.SetHelpTemplate("{{if .HasParent}}" + (&cobra.Command{}).HelpTemplate() + "{{else}}{{.Long}}{{end}}")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("%v", err) })
	root.AddCommand(newServeCmd(ran))
	for _, cc := range clientCommands {
		root.AddCommand(newClientCmd(cc, stdin, ran))
	}
	return root
}

// newClientCmd is one client command and its subcommands, each running with the arguments
// as given (its own pflag set parses them, and prints its usage for -h/--help).
func newClientCmd(cc clientCommand, stdin io.Reader, ran *bool) *cobra.Command {
	cmd := passThrough(cc.name, cc.short, ran, func(c *cobra.Command, args []string) error {
		return cc.run(c.Context(), args, stdin, c.OutOrStdout(), c.ErrOrStderr())
	})
	for _, s := range cc.subs {
		path := cc.name + " " + s.name
		cmd.AddCommand(passThrough(s.name, "", ran, func(c *cobra.Command, args []string) error {
			return withCmd(s.run(c.Context(), args, c.OutOrStdout(), c.ErrOrStderr()), path)
		}))
	}
	return cmd
}

// passThrough is a cobra command whose run parses its own flags. "exactq help NAME" runs it
// with --help, so it prints the same usage text.
func passThrough(name, short string, ran *bool, run func(*cobra.Command, []string) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:                name,
		Short:              short,
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			*ran = true
			return run(c, args)
		},
	}
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
		if err := run(c, []string{"--help"}); err != nil && !errors.Is(err, errHelp) {
			fmt.Fprintln(c.ErrOrStderr(), err)
		}
	})
	cmd.ValidArgsFunction = func(c *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if !strings.HasPrefix(toComplete, "-") {
			return nil, cobra.ShellCompDirectiveDefault
		}
		var usageText bytes.Buffer
		c.SetOut(&usageText)
		_ = run(c, []string{"--help"}) // errHelp
		c.SetOut(nil)                  // cobra prints the completions to c's output
		return flagsIn(usageText.String(), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	return cmd
}

// usageFlag is a flag named in a usage text: "  -p, --partitions N", "[--validate-only]".
var usageFlag = regexp.MustCompile(`(?m)(?:^|[\s\[,])(--?[a-zA-Z][a-z-]*)`)

// flagsIn completes a flag name from the flags a command's usage text lists (its own pflag
// set is only built when it runs, and every usage text lists every flag).
func flagsIn(usageText, prefix string) []cobra.Completion {
	seen := map[string]bool{}
	var out []cobra.Completion
	for _, m := range usageFlag.FindAllStringSubmatch(usageText, -1) {
		if name := m[1]; strings.HasPrefix(name, prefix) && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

// newServeCmd is "exactq serve": the broker, its flags parsed by cobra (so --help and
// completion list them).
func newServeCmd(ran *bool) *cobra.Command {
	opts := defaultServeOptions()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run a broker (zero config: ./exactq-data, 127.0.0.1:9092)",
		Args:  cobra.NoArgs,
	}
	configFile := serveFlags(cmd.Flags(), &opts)
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		*ran = true
		if err := applyConfigFile(*configFile, c.Flags(), opts.brokerConfigs); err != nil {
			return err
		}
		return serve(opts)
	}
	return cmd
}

// exitCode prints err and returns the process exit code: 0 on success or -h, 2 for a
// usage error, 1 for any other failure. name is the command ("topic create"), "" for exactq
// itself.
func exitCode(name string, err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		if ue.cmd != "" {
			name = ue.cmd
		}
		if name == "" {
			fmt.Fprintf(stderr, "exactq: %v\nRun \"exactq --help\" for usage.\n", err)
			return 2
		}
		fmt.Fprintf(stderr, "exactq %s: %v\nRun \"exactq %s -h\" for usage.\n", name, err, name)
		return 2
	default:
		if name == "" {
			fmt.Fprintf(stderr, "exactq: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "exactq %s: %v\n", name, err)
		return 1
	}
}
