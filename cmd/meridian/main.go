// Command meridian is Meridian's command-line tool: schema and migrations,
// queue stats, dead-letter handling, the standalone dashboard and the
// benchmark harness.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// command is one subcommand. Each lives in a file of its own and adds
// itself to commands from an init function.
type command struct {
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 || os.Args[1] == "help" || os.Args[1] == "-h" || os.Args[1] == "--help" {
		usage()
		return
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "meridian: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err := c.run(ctx, os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "meridian %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: meridian <command> [flags]\n\ncommands:")
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(os.Stderr, "\nRun 'meridian <command> -h' for a command's flags.")
}
