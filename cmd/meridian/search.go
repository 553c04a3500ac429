package main

import (
	"context"
	"fmt"

	"github.com/meridianjobs/meridian/queue/driver"
)

// The search command: the payload search index, an opt-in step outside
// the numbered migrations (sqlqueue.Queue.EnableSearchIndex).

func init() {
	commands["search"] = command{
		summary: "enable, disable or show the payload search index (opt-in, outside the migrations)",
		main:    searchMain,
	}
}

// searchIndexer is what a store with a payload search index offers
// (sqlqueue's Queue).
type searchIndexer interface {
	EnableSearchIndex(ctx context.Context) error
	DisableSearchIndex(ctx context.Context) error
	SearchIndexEnabled(ctx context.Context) (bool, error)
}

func searchMain(ctx context.Context, args []string, s stdio) error {
	fs, dsn := newFlags("search", "enable|disable|status --dsn URL", s.errOut)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "enable" && pos[0] != "disable" && pos[0] != "status" {
		fs.Usage()
		return usagef("search takes one of enable, disable and status, got %q", pos)
	}
	q, err := openExisting(ctx, *dsn)
	if err != nil {
		return err
	}
	defer q.Close()
	si, ok := q.(searchIndexer)
	if !ok {
		return fmt.Errorf("this store has no payload search index: a search there examines the jobs within a time budget: %w", driver.ErrUnsupported)
	}
	switch pos[0] {
	case "enable":
		if err := si.EnableSearchIndex(ctx); err != nil {
			return err
		}
		_, err = fmt.Fprintln(s.out, "search index: on (payload searches of 3 characters or more use it)")
		return err
	case "disable":
		if err := si.DisableSearchIndex(ctx); err != nil {
			return err
		}
		_, err = fmt.Fprintln(s.out, "search index: off (payload searches scan within a time budget)")
		return err
	}
	on, err := si.SearchIndexEnabled(ctx)
	if err != nil {
		return err
	}
	state := "off (payload searches scan within a time budget; `meridian search enable` creates it)"
	if on {
		state = "on"
	}
	_, err = fmt.Fprintln(s.out, "search index: "+state)
	return err
}
