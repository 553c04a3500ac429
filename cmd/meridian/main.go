// Command meridian is Meridian's command-line tool: schema and migrations,
// queue stats, jobs and dead letters, the standalone dashboard and the
// benchmark harness. docs/cli.md describes every command.
//
// Exit status: 0 when the command did what was asked (and for -h), 1 when
// it failed, 2 when the command line was wrong.
package main

import (
	"context"
	"fmt"
	"golang.org/x/term"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/meridianjobs/meridian/internal/display"
)

// command is one subcommand. Each lives in a file of its own and adds
// itself to commands from an init function, with main (streams given) or
// run (the process's own streams).
type command struct {
	summary string
	main    func(ctx context.Context, args []string, s stdio) error
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	// A terminal, not any character device: /dev/null is one too, and a
	// script reading from it must not be taken for a person.
	s := stdio{out: os.Stdout, errOut: os.Stderr, in: os.Stdin, inTerminal: isTerminal(os.Stdin)}
	code := run(ctx, os.Args[1:], s)
	stop()
	os.Exit(code)
}

// run runs the command line args (without the program name) and returns
// the exit code. What the command writes passes through
// display.Printable: job names, errors and payloads come from the store,
// and a control character in them (an escape sequence) is shown as its
// \uXXXX escape instead of acting on the terminal.
func run(ctx context.Context, args []string, s stdio) int {
	out, errOut := display.NewPrintableWriter(s.out), display.NewPrintableWriter(s.errOut)
	defer func() { _, _ = out.Flush(), errOut.Flush() }()
	s.out, s.errOut = out, errOut
	if len(args) == 0 {
		usage(s.errOut)
		return exitUsage
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(s.out)
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(s.errOut, "meridian: unknown command %q\n\n", args[0])
		usage(s.errOut)
		return exitUsage
	}
	var err error
	if c.main != nil {
		err = c.main(ctx, args[1:], s)
	} else {
		err = c.run(ctx, args[1:])
	}
	if code := exitCode(err); code != exitOK {
		fmt.Fprintf(s.errOut, "meridian %s: %v\n", args[0], err)
		return code
	}
	return exitOK
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: meridian <command> [arguments and flags, in any order]\n\ncommands:")
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range commands {
			if !yield(n) {
				return
			}
		}
	}) {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'meridian <command> -h' for a command's flags. The queue is --dsn or $MERIDIAN_DSN.\nExit status: 0 done, 1 failed, 2 wrong command line.")
}

// isTerminal reports whether f is a terminal a person can type into.
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
