// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Keys of the vidra-config ConfigMap.
const (
	KeyRequeueAfter     = "requeueResourcesAfter"
	KeyEventBased       = "eventBasedReconcile"
	KeyJitter           = "requeueJitter"
	KeyOverrideManagers = "overrideManagers"
	// KeyRequeueSyncAfter and KeyQueryName are the earlier operator's keys,
	// read by the InfrahubSync controller: the default poll interval and
	// stored query of syncs that set none.
	KeyRequeueSyncAfter = "requeueSyncAfter"
	KeyQueryName        = "queryName"
)

// legacyKeys were read by the earlier Vidra operator and mean nothing
// now; none is left, the earlier keys all have their meaning again.
var legacyKeys = []string{}

var knownKeys = []string{KeyRequeueAfter, KeyEventBased, KeyJitter, KeyOverrideManagers, KeyRequeueSyncAfter, KeyQueryName}

// Config is one consistent set of settings. It is immutable once published:
// readers hold a pointer to it without locks.
type Config struct {
	// RequeueAfter is the default periodic re-check interval; 0 turns it off.
	RequeueAfter time.Duration
	// EventBased corrects drift on watch events for resources that do not
	// say otherwise.
	EventBased bool
	// Jitter spreads periodic re-checks by up to this fraction of the
	// interval, so that resources created together do not wake together.
	Jitter float64
	// OverrideManagers are the field managers whose writes are hand edits
	// that Vidra takes back, even of fields the manifest does not set.
	OverrideManagers []string
	// RequeueSyncAfter is the default poll interval of InfrahubSyncs, at
	// least MinInterval.
	RequeueSyncAfter time.Duration
	// QueryName is the default stored query of InfrahubSyncs; empty means
	// Vidra's own GraphQL query.
	QueryName string
}

// DefaultQueryName is the stored query of the earlier operator's docs.
const DefaultQueryName = "ArtifactIDs"

// DefaultOverrideManagers are the field managers kubectl uses for writes a
// person makes by hand.
var DefaultOverrideManagers = []string{
	"kubectl", "kubectl-edit", "kubectl-label", "kubectl-annotate", "kubectl-patch",
	"kubectl-scale", "kubectl-client-side-apply", "before-first-apply",
}

// Default returns the settings used when the ConfigMap is missing.
func Default() *Config {
	return &Config{
		RequeueAfter:     10 * time.Minute,
		EventBased:       true,
		Jitter:           0.1,
		OverrideManagers: slices.Clone(DefaultOverrideManagers),
		RequeueSyncAfter: time.Minute,
		QueryName:        DefaultQueryName,
	}
}

// Problem is a key of the ConfigMap that was not applied.
type Problem struct {
	Key     string
	Value   string
	Message string
	// Warning is true for keys accepted but ignored; false for bad values
	// that kept the previous setting.
	Warning bool
}

func (p Problem) String() string {
	if p.Warning {
		return fmt.Sprintf("%s: %s", p.Key, p.Message)
	}
	return fmt.Sprintf("%s: invalid value %q, keeping the previous setting: %s", p.Key, p.Value, p.Message)
}

// Parse builds the Config for data. A key that is absent takes its default; a
// key whose value does not parse keeps its value from prev, so a typo never
// resets a setting that worked, and is reported as a Problem.
func Parse(data map[string]string, prev *Config) (*Config, []Problem) {
	if prev == nil {
		prev = Default()
	}
	def := Default()
	cfg := &Config{}
	var problems []Problem
	bad := func(key, msg string, keep func()) {
		problems = append(problems, Problem{Key: key, Value: data[key], Message: msg})
		keep()
	}

	if v, ok := data[KeyRequeueAfter]; !ok {
		cfg.RequeueAfter = def.RequeueAfter
	} else if d, err := ParseDuration(v); err != nil {
		bad(KeyRequeueAfter, err.Error(), func() { cfg.RequeueAfter = prev.RequeueAfter })
	} else {
		cfg.RequeueAfter = d
	}

	if v, ok := data[KeyEventBased]; !ok {
		cfg.EventBased = def.EventBased
	} else if b, err := strconv.ParseBool(strings.TrimSpace(v)); err != nil {
		bad(KeyEventBased, "want true or false", func() { cfg.EventBased = prev.EventBased })
	} else {
		cfg.EventBased = b
	}

	if v, ok := data[KeyJitter]; !ok {
		cfg.Jitter = def.Jitter
	} else if j, err := parsePercent(v); err != nil {
		bad(KeyJitter, err.Error(), func() { cfg.Jitter = prev.Jitter })
	} else {
		cfg.Jitter = j
	}

	if v, ok := data[KeyOverrideManagers]; !ok {
		cfg.OverrideManagers = def.OverrideManagers
	} else {
		var managers []string
		for m := range strings.SplitSeq(v, ",") {
			if m = strings.TrimSpace(m); m != "" {
				managers = append(managers, m)
			}
		}
		if len(managers) == 0 && strings.TrimSpace(v) != "" {
			// Commas and no name is a list whose names were lost (a
			// template's empty variable), not a choice of none: an empty
			// value says none.
			bad(KeyOverrideManagers, "no field manager named; list names separated by commas, or leave the value empty to take back hand edits only of the fields the manifest sets",
				func() { cfg.OverrideManagers = prev.OverrideManagers })
		} else {
			cfg.OverrideManagers = managers
		}
	}

	if v, ok := data[KeyRequeueSyncAfter]; !ok {
		cfg.RequeueSyncAfter = def.RequeueSyncAfter
	} else if d, err := ParseDuration(v); err != nil || d == 0 {
		msg := "must be at least 1s: an InfrahubSync always polls"
		if err != nil {
			msg = err.Error()
		}
		bad(KeyRequeueSyncAfter, msg, func() { cfg.RequeueSyncAfter = prev.RequeueSyncAfter })
	} else {
		cfg.RequeueSyncAfter = d
	}

	if v, ok := data[KeyQueryName]; !ok {
		cfg.QueryName = def.QueryName
	} else if v = strings.TrimSpace(v); len(v) > 253 || strings.ContainsFunc(v, func(r rune) bool {
		return !(r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		bad(KeyQueryName, "want the name of a stored query: letters, digits, '_', '-' and '.', or empty for Vidra's own query", func() { cfg.QueryName = prev.QueryName })
	} else {
		cfg.QueryName = v
	}

	for _, k := range legacyKeys {
		if _, ok := data[k]; ok {
			problems = append(problems, Problem{Key: k, Value: data[k], Warning: true,
				Message: "set for the earlier Vidra operator; ignored"})
		}
	}
	for k := range data {
		if !slices.Contains(knownKeys, k) && !slices.Contains(legacyKeys, k) {
			problems = append(problems, Problem{Key: k, Value: data[k], Warning: true, Message: "unknown key; ignored"})
		}
	}
	slices.SortFunc(problems, func(a, b Problem) int { return strings.Compare(a.Key, b.Key) })
	return cfg, problems
}

// Interval is the periodic re-check, before jitter, of a resource whose
// spec.interval is spec: requeueResourcesAfter when it is nil, and never
// shorter than MinInterval. 0 means none. The CRD refuses shorter
// intervals; resources stored before it did, or under a CRD without its
// validation, must not loop either.
func (c *Config) Interval(spec *metav1.Duration) time.Duration {
	d := c.RequeueAfter
	if spec != nil {
		d = spec.Duration
	}
	if d > 0 && d < MinInterval {
		d = MinInterval
	}
	return d
}

// EventsOn reports whether a resource corrects drift as its objects'
// events come: its spec.destination.reconcileOnEvents when set (spec),
// eventBasedReconcile otherwise.
func (c *Config) EventsOn(spec *bool) bool {
	if spec != nil {
		return *spec
	}
	return c.EventBased
}

// MinInterval is the shortest periodic re-check: anything shorter would turn
// one resource into a reconcile loop that takes a worker from everyone else.
const MinInterval = time.Second

// ParseDuration parses a Go duration; "0" and "0s" turn the interval off. A
// negative duration, or one shorter than MinInterval, is refused.
func ParseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("want a Go duration such as 10m or 1h30m")
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative")
	}
	if d > 0 && d < MinInterval {
		return 0, fmt.Errorf("must be 0 (off) or at least %s", MinInterval)
	}
	return d, nil
}

// parsePercent accepts "10%" or a fraction such as "0.1", between 0 and 100%.
func parsePercent(v string) (float64, error) {
	v = strings.TrimSpace(v)
	scale := 1.0
	if s, ok := strings.CutSuffix(v, "%"); ok {
		v, scale = strings.TrimSpace(s), 100
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("want a percentage such as 10%%")
	}
	f /= scale
	// NaN compares false with everything: refused by name, or it would
	// pass as a share and make every re-check's delay NaN.
	if math.IsNaN(f) || f < 0 || f > 1 {
		return 0, fmt.Errorf("must be between 0%% and 100%%")
	}
	return f, nil
}
