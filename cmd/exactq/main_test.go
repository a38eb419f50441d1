package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// execArgs runs the exactq command line in-process and returns its exit code and output.
func execArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := execute(t.Context(), args, strings.NewReader(""), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// commandPaths lists every command of the tree, "" for exactq itself, "topic create" and so on.
func commandPaths(t *testing.T) []string {
	var ran bool
	var paths []string
	var walk func(c *cobra.Command, prefix []string)
	walk = func(c *cobra.Command, prefix []string) {
		if c.Hidden {
			return
		}
		paths = append(paths, strings.Join(prefix, " "))
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), prefix...), sub.Name()))
		}
	}
	root := newRootCmd(nil, nil, nil, &ran)
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	walk(root, nil)
	if len(paths) < 25 {
		t.Fatalf("command tree: %q", paths)
	}
	return paths
}

// TestHelpEveryCommand: --help, -h and "exactq help CMD" print a usage on stdout and exit 0
// for every command, and start nothing (serve --help does not listen).
func TestHelpEveryCommand(t *testing.T) {
	for _, path := range commandPaths(t) {
		words := strings.Fields(path)
		for _, args := range [][]string{append(words, "--help"), append(words, "-h"), append([]string{"help"}, words...)} {
			code, out, errs := execArgs(t, args...)
			if code != 0 || !strings.Contains(strings.ToLower(out), "usage") || errs != "" {
				t.Errorf("exactq %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errs)
			}
		}
	}
	_, out, _ := execArgs(t, "serve", "--help")
	for _, flag := range []string{"--config", "--listen", "--data-dir", "--fsync", "--advertised"} {
		if !strings.Contains(out, flag) {
			t.Errorf("serve --help lacks %s:\n%s", flag, out)
		}
	}
}

// TestUnknownFlag: an unknown flag on any command is a usage error: exit 2, the flag named on
// stderr with a hint to --help/-h, nothing on stdout.
func TestUnknownFlag(t *testing.T) {
	for _, path := range commandPaths(t) {
		if path == "help" {
			continue // "help --x" is cobra's help command, which takes command names
		}
		args := append(strings.Fields(path), "--no-such-flag")
		code, out, errs := execArgs(t, args...)
		if code != 2 || out != "" || !strings.Contains(errs, "--no-such-flag") || !strings.Contains(errs, "for usage") {
			t.Errorf("exactq %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errs)
		}
	}
	code, _, errs := execArgs(t, "topic", "create", "t", "--no-such-flag")
	if code != 2 || !strings.Contains(errs, "unknown flag: --no-such-flag") {
		t.Errorf("topic create --no-such-flag: exit %d, %q", code, errs)
	}
	if code, _, errs := execArgs(t, "no-such-command"); code != 2 || !strings.Contains(errs, `unknown command "no-such-command"`) {
		t.Errorf("unknown command: exit %d, %q", code, errs)
	}
	if code, _, errs := execArgs(t); code != 2 || !strings.Contains(errs, "Usage:") {
		t.Errorf("no command: exit %d, %q", code, errs)
	}
}

// TestCompletion: "exactq completion SHELL" prints that shell's script, and the scripts'
// completion requests list the commands, subcommands and every command's flags.
func TestCompletion(t *testing.T) {
	for shell, marker := range map[string]string{
		"bash": "complete -o default -F __start_exactq exactq", "zsh": "#compdef exactq",
		"fish": "complete -c exactq", "powershell": "Register-ArgumentCompleter",
	} {
		code, out, errs := execArgs(t, "completion", shell)
		if code != 0 || !strings.Contains(out, marker) || errs != "" {
			t.Errorf("completion %s: exit %d, %d bytes without %q, stderr %q", shell, code, len(out), marker, errs)
		}
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{""}, []string{"serve", "topic", "group", "share", "txn", "produce", "consume", "version", "completion"}},
		{[]string{"topic", ""}, []string{"create", "list", "describe", "delete", "alter"}},
		{[]string{"share", ""}, []string{"consume", "describe", "list", "reset-offsets", "delete-offsets"}},
		{[]string{"serve", "--"}, []string{"--config", "--listen", "--data-dir", "--fsync", "--advertised"}},
		{[]string{"topic", "create", "--p"}, []string{"--partitions"}},
		{[]string{"consume", "orders", "-"}, []string{"-b", "--brokers", "-f", "--follow", "--from", "--format"}},
		{[]string{"share", "reset-offsets", "--to"}, []string{"--to-earliest", "--to-latest", "--to-offset", "--topic"}},
	} {
		_, out, _ := execArgs(t, append([]string{cobra.ShellCompRequestCmd}, tc.args...)...)
		for _, w := range tc.want {
			if !strings.Contains(out, "\n"+w) && !strings.HasPrefix(out, w) {
				t.Errorf("completing %q: %q lacks %s", tc.args, out, w)
			}
		}
	}
	// Every client subcommand completes -b/--brokers, read from its usage text; cluster's
	// complete --bootstrap-controller (they talk to controller listeners).
	for _, path := range commandPaths(t) {
		words := strings.Fields(path)
		if len(words) == 0 || words[0] == "serve" || words[0] == "completion" || words[0] == "help" ||
			words[0] == "version" || (len(words) == 1 && path != "produce" && path != "consume") {
			continue
		}
		_, out, _ := execArgs(t, append(append([]string{cobra.ShellCompRequestCmd}, words...), "--b")...)
		want := "--brokers\n"
		if words[0] == "cluster" {
			want = "--bootstrap-controller\n"
		}
		if !strings.HasPrefix(out, want) {
			t.Errorf("completing exactq %s --b: %q", path, out)
		}
	}
}
