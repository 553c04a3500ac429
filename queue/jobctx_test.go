package queue

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestJobContext(t *testing.T) {
	t.Parallel()
	errBase, errJob := errors.New("base cause"), errors.New("job cause")
	tests := []struct {
		name string
		// act cancels what the case cancels (jc, base's cancel).
		act       func(jc *jobContext, cancelBase context.CancelCauseFunc)
		wantErr   error
		wantCause error
	}{
		{"nothing cancelled", func(*jobContext, context.CancelCauseFunc) {}, nil, nil},
		{"the job cancelled", func(jc *jobContext, _ context.CancelCauseFunc) { jc.cancel(errJob) }, context.Canceled, errJob},
		{"base cancelled, child never made", func(_ *jobContext, cb context.CancelCauseFunc) { cb(errBase) }, context.Canceled, errBase},
		{"base cancelled after Done was asked for", func(jc *jobContext, cb context.CancelCauseFunc) { _ = jc.Done(); cb(errBase) }, context.Canceled, errBase},
		{"the job cancelled, then base", func(jc *jobContext, cb context.CancelCauseFunc) { jc.cancel(errJob); cb(errBase) }, context.Canceled, errJob},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			type key struct{}
			base, cancelBase := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
			defer cancelBase(nil)
			j := &Job{ID: "a"}
			jc := newJobContext(base, j)
			defer jc.release()
			tt.act(jc, cancelBase)
			if err := jc.Err(); err != tt.wantErr {
				t.Errorf("Err = %v, want %v", err, tt.wantErr)
			}
			if c := context.Cause(jc); c != tt.wantCause {
				t.Errorf("Cause = %v, want %v", c, tt.wantCause)
			}
			select {
			case <-jc.Done():
				if tt.wantErr == nil {
					t.Error("Done is closed, but nothing was cancelled")
				}
			default:
				if tt.wantErr != nil {
					t.Error("Done is open after a cancel")
				}
			}
			if got, ok := JobFromContext(jc); !ok || got.ID != "a" {
				t.Errorf("JobFromContext = %v, %v", got.ID, ok)
			}
			if v := jc.Value(key{}); v != "v" {
				t.Errorf("a value of base = %v, want v", v)
			}
		})
	}
}

// TestJobContextTimeout checks that a timeout derived from a job's context
// ends at its deadline with its cause and is cancelled with the job.
func TestJobContextTimeout(t *testing.T) {
	t.Parallel()
	jc := newJobContext(context.Background(), &Job{ID: "a"})
	defer jc.release()
	tctx, cancel := context.WithTimeoutCause(jc, time.Hour, ErrTimeout)
	defer cancel()
	errJob := errors.New("lease lost")
	jc.cancel(errJob)
	<-tctx.Done()
	if c := context.Cause(tctx); c != errJob {
		t.Fatalf("the derived context's cause = %v, want the job's %v", c, errJob)
	}
}
