package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Results is a whole `meridian bench` run in machine-readable form, as
// written by --json and read back by --compare.
type Results struct {
	// Commit and Started are informational; Compare ignores them.
	Commit  string   `json:"commit,omitempty"`
	Started string   `json:"started,omitempty"`
	Reports []Report `json:"reports"`
}

// ReadResults decodes Results written by WriteJSON.
func ReadResults(r io.Reader) (Results, error) {
	var res Results
	if err := json.NewDecoder(r).Decode(&res); err != nil {
		return Results{}, fmt.Errorf("decoding bench results: %w", err)
	}
	return res, nil
}

// WriteJSON writes res as indented JSON.
func (res Results) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// Delta is one figure measured in both runs of a comparison.
type Delta struct {
	Driver, Name string
	Unit         Unit
	Old, New     float64
	// Change is the relative change of New from Old in percent, positive
	// when New is larger.
	Change float64
	// Worse is true when the change is a regression larger than the
	// threshold given to Compare: lower throughput, or a higher latency,
	// CPU time or size.
	Worse bool
}

// Compare pairs each figure of cur with the figure of the same driver and
// name in old and returns their deltas in cur's order. Figures present in
// only one run are skipped. A delta is Worse when throughput fell, or a
// latency rose, by more than threshold percent.
func Compare(old, cur Results, threshold float64) []Delta {
	type key struct{ driver, name string }
	prev := map[key]Figure{}
	for _, r := range old.Reports {
		for _, f := range r.Figures {
			prev[key{r.Driver, f.Name}] = f
		}
	}
	var out []Delta
	for _, r := range cur.Reports {
		for _, f := range r.Figures {
			p, ok := prev[key{r.Driver, f.Name}]
			if !ok || p.Unit != f.Unit || p.Value == 0 {
				continue
			}
			d := Delta{Driver: r.Driver, Name: f.Name, Unit: f.Unit, Old: p.Value, New: f.Value,
				Change: (f.Value - p.Value) / p.Value * 100}
			if f.Unit != PerSecond && f.Unit != PerCoreSecond { // times and sizes: more is worse
				d.Worse = d.Change > threshold
			} else {
				d.Worse = -d.Change > threshold
			}
			out = append(out, d)
		}
	}
	return out
}

// WriteDeltas writes one line per delta, marking regressions with "WORSE".
func WriteDeltas(w io.Writer, ds []Delta) error {
	var b strings.Builder
	for _, d := range ds {
		mark := ""
		if d.Worse {
			mark = "  WORSE"
		}
		fmt.Fprintf(&b, "%-9s %-48s %12.2f -> %12.2f %-7s %+7.1f%%%s\n", d.Driver, d.Name, d.Old, d.New, d.Unit, d.Change, mark)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
