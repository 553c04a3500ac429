package pushgroup_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/meridianjobs/meridian/internal/pushgroup"
	"github.com/meridianjobs/meridian/queue/driver"
)

// fakeStore records what reaches it. Its first PushAlone blocks until
// release is closed (so pushes pile up behind a busy lane); a group
// fails when failGroup is set; a job whose name is "dup" is a duplicate.
type fakeStore struct {
	release   chan struct{}
	failGroup bool

	mu      sync.Mutex
	alone   []string   // IDs pushed alone, in order
	groups  [][]string // IDs of each group
	stored  map[string]bool
	blocked bool
}

func newFake() *fakeStore {
	return &fakeStore{release: make(chan struct{}), stored: map[string]bool{}}
}

func (f *fakeStore) PushAlone(ctx context.Context, j driver.Job) error {
	f.mu.Lock()
	first := !f.blocked
	f.blocked = true
	f.alone = append(f.alone, j.ID)
	f.mu.Unlock()
	if first {
		select {
		case <-f.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return f.store(j)
}

func (f *fakeStore) store(j driver.Job) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if j.Name == "dup" {
		return &driver.DuplicateError{ExistingID: "another"}
	}
	if f.stored[j.ID] {
		return &driver.DuplicateError{ExistingID: j.ID}
	}
	f.stored[j.ID] = true
	return nil
}

func (f *fakeStore) PushGroup(ctx context.Context, jobs []driver.Job) ([]error, error) {
	f.mu.Lock()
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	f.groups = append(f.groups, ids)
	fail := f.failGroup
	f.mu.Unlock()
	if fail {
		// Refused after storing: as if the answer were lost.
		for _, j := range jobs {
			_ = f.store(j)
		}
		return nil, errors.New("injected: the group was refused")
	}
	answers := make([]error, len(jobs))
	for i, j := range jobs {
		answers[i] = f.store(j)
	}
	return answers, nil
}

// pushAll starts a push of each job in turn, each once the one before it
// waits, after a first push that holds the lane; it returns their result
// channels, the first's last.
func pushAll(ctx context.Context, g *pushgroup.Group, s *fakeStore, lanes int, jobs []driver.Job, own []bool) []chan error {
	var out []chan error
	start := func(ctx context.Context, j driver.Job, ownID bool) chan error {
		ch := make(chan error, 1)
		go func() { ch <- g.Push(ctx, s, lanes, j, ownID) }()
		synctest.Wait()
		return ch
	}
	first := start(ctx, driver.Job{ID: "first", Name: "n"}, true)
	for i, j := range jobs {
		out = append(out, start(ctx, j, own[i]))
	}
	return append(out, first)
}

func TestGroup(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failGroup bool
		jobs      []driver.Job
		own       []bool
		want      []string // each waiting push's answer: "nil", "dup"
		groups    int
		alone     []string
	}{
		{
			name:   "waiting pushes go as one group, each answered",
			jobs:   []driver.Job{{ID: "a", Name: "n"}, {ID: "b", Name: "dup"}, {ID: "c", Name: "n"}},
			own:    []bool{true, false, false},
			want:   []string{"nil", "dup", "nil"},
			groups: 1,
			alone:  []string{"first"},
		},
		{
			name:      "a refused group is pushed again job by job",
			failGroup: true,
			jobs:      []driver.Job{{ID: "a", Name: "n"}, {ID: "b", Name: "n"}, {ID: "c", Name: "dup"}},
			own:       []bool{true, false, true},
			// a: its own ID, stored by the refused group: nil; b: a given
			// ID, stored too, but a duplicate of a given ID can be anyone's;
			// c: another job's duplicate all along.
			want:   []string{"nil", "dup", "dup"},
			groups: 1,
			alone:  []string{"first", "a", "b", "c"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newFake()
				s.failGroup = tc.failGroup
				g := &pushgroup.Group{Name: "test"}
				chs := pushAll(t.Context(), g, s, 1, tc.jobs, tc.own)
				if n := g.Waiting(); n != len(tc.jobs) {
					t.Fatalf("%d pushes wait, want %d", n, len(tc.jobs))
				}
				close(s.release)
				got := make([]string, len(tc.jobs))
				for i, ch := range chs[:len(tc.jobs)] {
					switch err := <-ch; {
					case err == nil:
						got[i] = "nil"
					case errors.Is(err, driver.ErrDuplicate):
						got[i] = "dup"
					default:
						got[i] = err.Error()
					}
				}
				if err := <-chs[len(tc.jobs)]; err != nil {
					t.Fatalf("the lane's push: %v", err)
				}
				g.Wait()
				if !slices.Equal(got, tc.want) {
					t.Errorf("answers %v, want %v", got, tc.want)
				}
				if len(s.groups) != tc.groups || !slices.Equal(s.alone, tc.alone) {
					t.Errorf("groups %v, alone %v; want %d groups, alone %v", s.groups, s.alone, tc.groups, tc.alone)
				}
			})
		})
	}
}

func TestGroupNoLanes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFake()
		close(s.release)
		g := &pushgroup.Group{Name: "test"}
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				if err := g.Push(t.Context(), s, 0, driver.Job{ID: fmt.Sprint(i), Name: "n"}, true); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if len(s.alone) != 5 || len(s.groups) != 0 {
			t.Fatalf("alone %v, groups %v: with no lanes every push goes alone", s.alone, s.groups)
		}
	})
}

// TestGroupCancelled: a push whose context ends while it waits stores
// nothing; one whose context ends while its group is written returns at
// once, and the group's write is cancelled when every caller gave up.
func TestGroupCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFake()
		g := &pushgroup.Group{Name: "test"}
		ctx, cancel := context.WithCancel(t.Context())
		chs := pushAll(t.Context(), g, s, 1, nil, nil)
		waiting := make(chan error, 1)
		go func() { waiting <- g.Push(ctx, s, 1, driver.Job{ID: "gave-up", Name: "n"}, true) }()
		synctest.Wait()
		cancel()
		if err := <-waiting; !errors.Is(err, context.Canceled) {
			t.Fatalf("a push cancelled while waiting: %v", err)
		}
		close(s.release)
		if err := <-chs[0]; err != nil {
			t.Fatal(err)
		}
		g.Wait()
		if s.stored["gave-up"] || len(s.groups) != 0 {
			t.Fatalf("stored %v, groups %v: the cancelled push reached the store", s.stored, s.groups)
		}

		// A group whose every caller gives up while it is written.
		s2 := &blockingGroup{entered: make(chan struct{}), free: make(chan struct{})}
		g2 := &pushgroup.Group{Name: "test"}
		lane := make(chan error, 1)
		go func() { lane <- g2.Push(t.Context(), s2, 1, driver.Job{ID: "lane", Name: "n"}, true) }()
		synctest.Wait() // the lane's push holds until s2.free
		ctx2, cancel2 := context.WithCancel(t.Context())
		member := make(chan error, 1)
		go func() { member <- g2.Push(ctx2, s2, 1, driver.Job{ID: "m", Name: "n"}, true) }()
		synctest.Wait()
		close(s2.free)
		<-s2.entered // the group is being written
		cancel2()
		if err := <-member; !errors.Is(err, context.Canceled) {
			t.Fatalf("a push cancelled while its group is written: %v", err)
		}
		if err := <-lane; err != nil {
			t.Fatal(err)
		}
		g2.Wait() // returns: the group's context ended with its last caller
		if !s2.cancelled {
			t.Fatal("the group's write was not cancelled when its only caller gave up")
		}
	})
}

// blockingGroup holds its first PushAlone until free is closed and writes
// a group until the group's context ends.
type blockingGroup struct {
	free      chan struct{}
	entered   chan struct{}
	cancelled bool
}

func (b *blockingGroup) PushAlone(ctx context.Context, j driver.Job) error {
	<-b.free
	return nil
}

func (b *blockingGroup) PushGroup(ctx context.Context, jobs []driver.Job) ([]error, error) {
	close(b.entered)
	<-ctx.Done()
	b.cancelled = true
	return nil, ctx.Err()
}
