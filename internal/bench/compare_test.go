package bench

import (
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	t.Parallel()
	const old = `{"reports":[{"Driver":"postgres","Figures":[
		{"Name":"burn-down (1000 jobs)","Value":10000,"Unit":"jobs/s"},
		{"Name":"latency p50","Value":2,"Unit":"ms"},
		{"Name":"heap held per queued job","Value":600,"Unit":"B"},
		{"Name":"gone","Value":1,"Unit":"jobs/s"}]}]}`
	tests := []struct {
		name      string
		cur       string
		threshold float64
		want      []Delta
	}{
		{"throughput fell beyond threshold", `{"reports":[{"Driver":"postgres","Figures":[{"Name":"burn-down (1000 jobs)","Value":9000,"Unit":"jobs/s"}]}]}`, 5,
			[]Delta{{Driver: "postgres", Name: "burn-down (1000 jobs)", Unit: PerSecond, Old: 10000, New: 9000, Change: -10, Worse: true}}},
		{"throughput fell within threshold", `{"reports":[{"Driver":"postgres","Figures":[{"Name":"burn-down (1000 jobs)","Value":9600,"Unit":"jobs/s"}]}]}`, 5,
			[]Delta{{Driver: "postgres", Name: "burn-down (1000 jobs)", Unit: PerSecond, Old: 10000, New: 9600, Change: -4}}},
		{"latency rose", `{"reports":[{"Driver":"postgres","Figures":[{"Name":"latency p50","Value":3,"Unit":"ms"}]}]}`, 5,
			[]Delta{{Driver: "postgres", Name: "latency p50", Unit: Milliseconds, Old: 2, New: 3, Change: 50, Worse: true}}},
		{"latency fell", `{"reports":[{"Driver":"postgres","Figures":[{"Name":"latency p50","Value":1,"Unit":"ms"}]}]}`, 5,
			[]Delta{{Driver: "postgres", Name: "latency p50", Unit: Milliseconds, Old: 2, New: 1, Change: -50}}},
		{"size grew", `{"reports":[{"Driver":"postgres","Figures":[{"Name":"heap held per queued job","Value":660,"Unit":"B"}]}]}`, 5,
			[]Delta{{Driver: "postgres", Name: "heap held per queued job", Unit: Bytes, Old: 600, New: 660, Change: 10, Worse: true}}},
		{"size shrank", `{"reports":[{"Driver":"postgres","Figures":[{"Name":"heap held per queued job","Value":540,"Unit":"B"}]}]}`, 5,
			[]Delta{{Driver: "postgres", Name: "heap held per queued job", Unit: Bytes, Old: 600, New: 540, Change: -10}}},
		{"other driver and new figure skipped", `{"reports":[{"Driver":"mysql","Figures":[{"Name":"latency p50","Value":9,"Unit":"ms"}]},{"Driver":"postgres","Figures":[{"Name":"new","Value":9,"Unit":"ms"}]}]}`, 5,
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := ReadResults(strings.NewReader(old))
			if err != nil {
				t.Fatal(err)
			}
			c, err := ReadResults(strings.NewReader(tt.cur))
			if err != nil {
				t.Fatal(err)
			}
			got := Compare(o, c, tt.threshold)
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("delta %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestResultsRoundTrip(t *testing.T) {
	t.Parallel()
	in := Results{Commit: "abc", Reports: []Report{{Driver: "memory", Figures: []Figure{{Name: "x", Value: 1.5, Unit: PerSecond}}}}}
	var b strings.Builder
	if err := in.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	out, err := ReadResults(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if out.Commit != "abc" || len(out.Reports) != 1 || out.Reports[0].Figures[0] != in.Reports[0].Figures[0] {
		t.Fatalf("round trip: got %+v", out)
	}
}
