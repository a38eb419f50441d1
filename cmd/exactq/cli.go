package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// defaultBrokers is the -b/--brokers default of every client command.
const defaultBrokers = "127.0.0.1:9092"

// cliClientID is the client id the command-line tools send in request headers.
const cliClientID = "exactq-cli"

// usageError is a command line the command cannot run: main prints it with a hint and
// exits 2 (every other error exits 1).
type usageError struct {
	msg string
	cmd string // the (sub)command whose -h to suggest, "topic create"; "" for main's name
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelp is returned after -h printed a command's usage: main exits 0.
var errHelp = errors.New("help requested")

// cmdFlags is a command's flag set with its usage text and the -b/--brokers flag every
// client command has. Flags are GNU-style (pflag): --name, -x shorthands, and they may come
// before, between or after positional arguments ("--" ends them).
type cmdFlags struct {
	*pflag.FlagSet
	usage   string
	stdout  io.Writer
	brokers string
}

func newCmdFlags(name, usage string, stdout io.Writer) *cmdFlags {
	f := newFlagsWithoutBrokers(name, usage, stdout)
	f.StringVarP(&f.brokers, "brokers", "b", defaultBrokers, "")
	return f
}

// newFlagsWithoutBrokers is a command's flag set without -b/--brokers, for the commands
// that talk to controller listeners instead (cluster).
func newFlagsWithoutBrokers(name, usage string, stdout io.Writer) *cmdFlags {
	f := &cmdFlags{FlagSet: pflag.NewFlagSet(name, pflag.ContinueOnError), usage: usage, stdout: stdout}
	// Parse errors become usageErrors printed once by main; -h prints usage to stdout.
	f.SetOutput(io.Discard)
	f.Usage = func() {}
	return f
}

// brokerList is the comma-separated -b value as a list.
func (f *cmdFlags) brokerList() []string {
	var out []string
	for _, b := range strings.Split(f.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// withCmd names the subcommand of a usage error, so main suggests its -h.
func withCmd(err error, cmd string) error {
	var ue *usageError
	if errors.As(err, &ue) && ue.cmd == "" {
		ue.cmd = cmd
	}
	return err
}

// parse parses args and returns the positional arguments. Their count must be in
// [minArgs, maxArgs] (maxArgs < 0: no limit).
func (f *cmdFlags) parse(args []string, minArgs, maxArgs int) ([]string, error) {
	if err := f.singleDashLong(args); err != nil {
		return nil, err
	}
	err := f.Parse(args)
	if errors.Is(err, pflag.ErrHelp) {
		fmt.Fprint(f.stdout, f.usage)
		return nil, errHelp
	}
	if err != nil {
		return nil, usagef("%v", err)
	}
	pos := f.Args()
	switch {
	case len(pos) < minArgs:
		return nil, usagef("missing arguments (want at least %d, got %d)", minArgs, len(pos))
	case maxArgs >= 0 && len(pos) > maxArgs:
		return nil, usagef("unexpected argument %q", pos[maxArgs])
	}
	return pos, nil
}

// singleDashLong refuses a long flag written with one dash ("-brokers h:1", which Go's flag
// package, the CLI's parser before pflag, accepted): pflag would read it as -b with the value
// "rokers".
func (f *cmdFlags) singleDashLong(args []string) error {
	for _, a := range args {
		if a == "--" {
			return nil
		}
		if len(a) < 3 || a[0] != '-' || a[1] == '-' {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if len(name) > 1 && f.Lookup(name) != nil {
			return usagef("-%s: a long flag takes two dashes: --%s", name, name)
		}
	}
	return nil
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Type() string   { return "strings" }
func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// keyValues parses key=value strings (the value may be empty, the key may not).
func keyValues(flagName string, kvs []string) ([][2]string, error) {
	out := make([][2]string, 0, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: want key=value", flagName, kv)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

// subcommand is one verb of a command family ("topic create", "group list", ...).
type subcommand struct {
	name string
	run  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// quiet adapts a subcommand that writes only to stdout.
func quiet(run func(context.Context, []string, io.Writer) error) func(context.Context, []string, io.Writer, io.Writer) error {
	return func(ctx context.Context, args []string, stdout, _ io.Writer) error { return run(ctx, args, stdout) }
}

// dispatch runs "exactq FAMILY SUBCOMMAND ...": the named subcommand, the family's usage
// for -h, or a usage error naming the subcommands.
func dispatch(ctx context.Context, family, usage string, subs []subcommand, args []string, stdout, stderr io.Writer) error {
	names := make([]string, len(subs))
	for i, s := range subs {
		names[i] = s.name
	}
	list := strings.Join(names, ", ")
	if len(args) == 0 {
		return usagef("missing subcommand (%s)", list)
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return errHelp
	}
	for _, s := range subs {
		if s.name == sub {
			return withCmd(s.run(ctx, rest, stdout, stderr), family+" "+sub)
		}
	}
	return usagef("unknown subcommand %q (%s)", sub, list)
}
