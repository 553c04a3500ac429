// Command ratelimit calls a rate-limited API from two workers, as two
// processes would: every account may make 5 calls a second and one at a
// time, across the whole cluster, because the limits keep their state in
// the queue's store. Jobs a limit stops are snoozed, never failed.
//
//	go run ./examples/ratelimit                       # sqlite://meridian-ratelimit.db
//	go run ./examples/ratelimit -queue memory://
//	go run ./examples/ratelimit -queue 'postgres://...'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	_ "github.com/meridianjobs/meridian/memqueue"
	"github.com/meridianjobs/meridian/queue"
	_ "github.com/meridianjobs/meridian/sqlqueue/mysql"
	_ "github.com/meridianjobs/meridian/sqlqueue/postgres"
	_ "github.com/meridianjobs/meridian/sqlqueue/sqlite"
)

// SyncContacts calls the CRM's API for one account.
type SyncContacts struct {
	Account string
	Page    int
}

// LimitKey makes the account the key of the limits (queue.KeyFrom).
func (s SyncContacts) LimitKey() string { return "crm:" + s.Account }

const (
	perSecond = 5
	pages     = 12
)

func main() {
	url := flag.String("queue", "sqlite://meridian-ratelimit.db", "queue URL: sqlite://file, memory://, postgres://..., mysql://...")
	flag.Parse()
	if err := run(context.Background(), *url, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run opens the queue at url, syncs two accounts and checks the limits.
func run(ctx context.Context, url string, out io.Writer) error {
	q, err := queue.Open(ctx, url)
	if err != nil {
		return err
	}
	defer q.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)

	lim, err := queue.NewLimiter(q, quiet)
	if err != nil {
		return err
	}
	key := queue.KeyFrom[SyncContacts]()
	rate, err := lim.Rate(key, perSecond, time.Second)
	if err != nil {
		return err
	}
	one, err := lim.Concurrency(key, 1, 10*time.Second, 50*time.Millisecond)
	if err != nil {
		return err
	}

	var mu sync.Mutex
	calls := map[string][]time.Time{}
	running := map[string]int{}
	overlap := false
	done := make(chan struct{}, 2*pages)
	var wg sync.WaitGroup
	for range 2 {
		w := queue.NewWorker(q).Use(rate, one).Concurrency(4).Poll(20 * time.Millisecond).Slog(quiet)
		queue.Handle(w, func(ctx context.Context, s SyncContacts) error {
			mu.Lock()
			calls[s.Account] = append(calls[s.Account], time.Now())
			running[s.Account]++
			overlap = overlap || running[s.Account] > 1
			mu.Unlock()
			fmt.Fprintf(out, "%s page %d\n", s.Account, s.Page)
			time.Sleep(10 * time.Millisecond) // the API call
			mu.Lock()
			running[s.Account]--
			mu.Unlock()
			done <- struct{}{}
			return nil
		})
		wg.Go(func() {
			if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Print(err)
			}
		})
	}
	defer wg.Wait()
	defer cancel()

	var jobs []SyncContacts
	for p := range pages {
		jobs = append(jobs, SyncContacts{"acme", p}, SyncContacts{"globex", p})
	}
	if _, err := queue.DispatchMany(ctx, q, jobs); err != nil {
		return err
	}
	for range jobs {
		select {
		case <-done:
		case <-ctx.Done():
			return errors.New("the calls did not finish in time")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if overlap {
		return errors.New("two calls of one account ran at once")
	}
	for account, at := range calls {
		slices.SortFunc(at, time.Time.Compare)
		for i := 0; i+perSecond < len(at); i++ {
			// 50 ms of slack for the handlers' own scheduling.
			if d := at[i+perSecond].Sub(at[i]); d < time.Second-50*time.Millisecond {
				return fmt.Errorf("%s made %d calls within %s", account, perSecond+1, d)
			}
		}
		fmt.Fprintf(out, "%s: %d calls over %s\n", account, len(at), at[len(at)-1].Sub(at[0]).Round(time.Millisecond))
	}
	return nil
}
