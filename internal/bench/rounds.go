package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Rounds collects the figures of interleaved rounds of several systems
// measured side by side (the peer comparisons under internal/bench), one
// value per round for each system and figure.
type Rounds struct {
	systems []string
	names   []string // figure names in first-seen order
	units   map[string]Unit
	values  map[string]map[string][]float64 // system -> name -> one value per round
}

// NewRounds returns an empty Rounds of the systems named.
func NewRounds(systems ...string) *Rounds {
	r := &Rounds{systems: systems, units: map[string]Unit{}, values: map[string]map[string][]float64{}}
	for _, s := range systems {
		r.values[s] = map[string][]float64{}
	}
	return r
}

// Add records one round's figures of system.
func (r *Rounds) Add(system string, figs []Figure) {
	for _, f := range figs {
		if !slices.Contains(r.names, f.Name) {
			r.names = append(r.names, f.Name)
		}
		r.units[f.Name] = f.Unit
		r.values[system][f.Name] = append(r.values[system][f.Name], f.Value)
	}
}

// Values returns the values of figure name for system, one per round.
func (r *Rounds) Values(system, name string) []float64 { return r.values[system][name] }

// WriteTable prints one Markdown row per figure: each system's rounds,
// then the ratio of the last system's median to the first's. For
// throughput a ratio above 1 favours the last system; for times and sizes
// (latency, CPU, bytes) one below 1 does.
func (r *Rounds) WriteTable(w io.Writer) error {
	var b strings.Builder
	first, last := r.systems[0], r.systems[len(r.systems)-1]
	fmt.Fprintf(&b, "| figure | %s | %s / %s (medians) |\n|---|%s---|\n",
		strings.Join(r.systems, " | "), last, first, strings.Repeat("---|", len(r.systems)))
	for _, name := range r.names {
		unit := r.units[name]
		cells := make([]string, len(r.systems))
		for i, s := range r.systems {
			vs := r.values[s][name]
			parts := make([]string, len(vs))
			for j, v := range vs {
				parts[j] = formatFigure(v, unit)
			}
			cells[i] = strings.Join(parts, " / ")
		}
		fv, lv := r.values[first][name], r.values[last][name]
		ratio := ""
		if len(fv) > 0 && len(lv) > 0 && Median(fv) > 0 {
			ratio = fmt.Sprintf("%.2fx", Median(lv)/Median(fv))
		}
		fmt.Fprintf(&b, "| %s, %s | %s | %s |\n", name, unit, strings.Join(cells, " | "), ratio)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// formatFigure prints throughputs in thousands (18.1k), bytes whole and
// times in ms.
func formatFigure(v float64, u Unit) string {
	switch u {
	case PerSecond:
		return fmt.Sprintf("%.1fk", v/1000)
	case Bytes:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// Median returns the median of vs (the mean of the middle two for an even
// count), 0 for none.
func Median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
