package sqlqueue

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meridianjobs/meridian/internal/pushgroup"
)

// URLParams are the query parameters of a queue URL that sqlqueue itself
// reads (URLOptions), the same for every dialect:
//
//	table=NAME                 WithTable
//	setup=false                skip Setup (the schema is migrated elsewhere)
//	visibility_timeout=15m     WithVisibilityTimeout
//	retention=24h              how long done and cancelled jobs are kept (WithRetention's finished)
//	dead_retention=168h        how long dead letters are kept; 0 keeps them (WithRetention's dead)
//	maintenance=1m             how often the maintenance pass runs (WithMaintenance's every)
//	worker_ttl=2m              when a silent worker leaves the registry (WithMaintenance's workerTTL)
//	push_lanes=2               single pushes run on their own at once before others group (WithPushLanes)
//
// Durations are Go durations (90s, 1h30m).
var URLParams = []string{"table", "setup", "visibility_timeout", "retention", "dead_retention", "maintenance", "worker_ttl", "push_lanes"}

// URLOptions reads sqlqueue's own parameters (URLParams) from v, removing
// them, and returns the options they set and whether Setup should run
// (true unless setup=false). A value that does not parse, or an option
// that refuses it, is an error naming the parameter. The parameters left
// in v are the database driver's: the registration packages check them
// against what their driver knows and refuse the rest, so a typo never
// reaches the server as a setting.
func URLOptions(v url.Values) (opts []Option, setup bool, err error) {
	setup = true
	for _, key := range URLParams {
		vals, ok := v[key]
		if !ok {
			continue
		}
		val := vals[len(vals)-1]
		v.Del(key)
		if key == "table" {
			opts = append(opts, WithTable(val))
			continue
		}
		if key == "setup" {
			if setup, err = strconv.ParseBool(val); err != nil {
				return nil, false, fmt.Errorf("sqlqueue: URL parameter setup must be true or false, not %q", val)
			}
			continue
		}
		if key == "push_lanes" {
			n, perr := pushgroup.ParseLanes(val)
			if perr != nil {
				return nil, false, fmt.Errorf("sqlqueue: %w", perr)
			}
			opts = append(opts, WithPushLanes(n))
			continue
		}
		d, perr := time.ParseDuration(val)
		if perr != nil {
			return nil, false, fmt.Errorf("sqlqueue: URL parameter %s must be a duration such as 90s or 1h30m, not %q", key, val)
		}
		opts = append(opts, durationOption(key, d))
	}
	return opts, setup, nil
}

// durationOption is the Option of one duration parameter of URLParams.
func durationOption(key string, d time.Duration) Option {
	return func(c *config) error {
		bad := func(rule string) error {
			return fmt.Errorf("sqlqueue: URL parameter %s must be %s, not %v", key, rule, d)
		}
		switch key {
		case "visibility_timeout":
			return WithVisibilityTimeout(d)(c)
		case "retention":
			if d < 0 {
				return bad("zero or more")
			}
			c.keepFinished = d
		case "dead_retention":
			if d < 0 {
				return bad("zero or more")
			}
			c.keepDead = d
		case "maintenance":
			if d <= 0 {
				return bad("positive")
			}
			c.maintainEvery = d
		case "worker_ttl":
			if d <= 0 {
				return bad("positive")
			}
			c.workerTTL = d
		}
		return nil
	}
}

// CheckDriverParams returns an error for the first key of v that is not in
// known (matched exactly, in the driver's own spelling), listing
// sqlqueue's parameters and the driver's. The registration packages call
// it on what URLOptions left.
func CheckDriverParams(v url.Values, driver string, known []string) error {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range v {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		if !slices.Contains(known, k) {
			drv := "none"
			if len(known) > 0 {
				drv = strings.Join(known, ", ")
			}
			return fmt.Errorf("sqlqueue: unknown URL parameter %q: sqlqueue's are %s; %s's are %s",
				k, strings.Join(URLParams, ", "), driver, drv)
		}
	}
	return nil
}
