// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups

import (
	"fmt"
	"time"
)

// Cause is why a stream of requests happens.
type Cause string

// The causes, each decided by one rule of classify.
const (
	LeaseRenewal Cause = "lease-renewal"
	WatchRestart Cause = "watch-restart"
	Relist       Cause = "relist"
	InitialList  Cause = "initial-list"
	RequeuePoll  Cause = "requeue-poll"
	Resync       Cause = "resync"
	Heartbeat    Cause = "heartbeat"
	HotLoop      Cause = "hot-loop"
	Fight        Cause = "fight"
	Unexplained  Cause = "unexplained"
)

// Causes lists every cause, in the order tables show them.
var Causes = []Cause{HotLoop, Fight, RequeuePoll, Resync, Heartbeat, Relist, InitialList, LeaseRenewal, WatchRestart, Unexplained}

// Saving tells what share of a cause's requests an event-driven client
// would not make: polls, resyncs, hot loops, fights and relists all of
// them (a watch tells what changed); a heartbeat those that changed
// nothing (all of them when the log cannot tell); Lease renewals and watch
// restarts are what event-driven costs, and so is an informer's initial
// list; of unexplained requests nothing is
// claimed.
func (c Cause) Saving() float64 {
	switch c {
	case RequeuePoll, Resync, HotLoop, Fight, Relist, Heartbeat:
		return 1
	}
	return 0
}

// Facts is what the rules read of one stream: the decision is a function
// of it alone, so each rule is tested on a Facts value.
type Facts struct {
	Verb                         string
	Group, Resource, Subresource string
	// Named is a stream on one object (a name, or a field selector on
	// metadata.name).
	Named bool
	// Timing of the stream's kept requests.
	Timing Timing
	// Requests is the stream's count.
	Requests int64
	// InitialEvents is a watch that starts with a list (sendInitialEvents).
	InitialEvents bool
	// NoVersion counts lists and watches without a resourceVersion;
	// After410 lists after a 410 Gone.
	NoVersion, After410 int64
	// WrittenBetween counts the gaps between two reads during which the
	// object was written (by anyone).
	WrittenBetween int
	// Turns counts the changes of writer among the object's latest writes;
	// Rival is the other writer.
	Turns int
	Rival string
	// ResyncPeriod is the period of bursts over many objects of this kind
	// by this client and verb, zero if none.
	ResyncPeriod time.Duration
	// Unchanged of Known writes returned the resourceVersion of the
	// previous one (level RequestResponse only).
	Unchanged, Known int64
}

// Verdict is a stream's cause and the rule's reason, in words.
type Verdict struct {
	Cause  Cause  `json:"cause"`
	Reason string `json:"reason"`
}

// minHotLoopGaps is how many gaps of under a second between writes of one
// object make a hot loop: six writes at least.
const minHotLoopGaps = 5

// classify applies the rules in order; the first that fits decides.
func classify(f Facts) Verdict {
	t := f.Timing
	write := IsWrite(f.Verb)
	switch {
	case f.Group == "coordination.k8s.io" && f.Resource == "leases" && (f.Verb == "get" || f.Verb == "update" || f.Verb == "patch"):
		return Verdict{LeaseRenewal, fmt.Sprintf("%s of a coordination.k8s.io Lease", f.Verb)}
	case f.Verb == "watch" && f.InitialEvents && f.Requests == 1:
		return Verdict{InitialList, "one watch with sendInitialEvents in the window: an informer starting"}
	case f.Verb == "list" && !f.Named && f.Requests == 1 && f.After410 == 0:
		return Verdict{InitialList, "one list of the whole collection in the window: an informer starting"}
	case f.Verb == "watch" && f.InitialEvents:
		return Verdict{Relist, fmt.Sprintf("%d watches with sendInitialEvents: streaming lists of the whole collection, again", f.Requests)}
	case f.Verb == "watch":
		return Verdict{WatchRestart, "watch: each request restarts the stream (its timeoutSeconds, or a closed connection)"}
	case write && f.Turns >= 3:
		return Verdict{Fight, fmt.Sprintf("%d changes of writer among the object's last %d writes, with %s", f.Turns, objectWrites, f.Rival)}
	// A loop keeps writing: a few quick writes are a controller converging
	// (the ClusterRole aggregation controller patches admin once for each
	// aggregated role that appears at start-up), not one.
	case write && f.Named && t.Quick >= minHotLoopGaps && t.Quick*2 >= t.Gaps:
		return Verdict{HotLoop, fmt.Sprintf("%d of %d writes of the same object within 1s of the previous", t.Quick, t.Gaps)}
	case write && f.Named && (f.Verb == "update" || f.Verb == "patch" || f.Verb == "apply") && t.Periodic():
		what := "writes of one object"
		if f.Subresource == "status" {
			what = "status writes"
		}
		if f.Known > 0 {
			return Verdict{Heartbeat, fmt.Sprintf("%s at a fixed period; %d of %d changed nothing", what, f.Unchanged, f.Known)}
		}
		return Verdict{Heartbeat, what + " at a fixed period (level Metadata: whether they changed anything is unknown)"}
	case !write && f.Named && (f.Verb == "get" || f.Verb == "list") && t.Periodic() && f.ResyncPeriod > 0 && near(f.ResyncPeriod, t.Period):
		return Verdict{Resync, fmt.Sprintf("%s of every object of the kind in bursts every %s", f.Verb, round(f.ResyncPeriod))}
	case !write && f.Named && (f.Verb == "get" || f.Verb == "list") && t.Periodic() && f.WrittenBetween*5 <= t.Gaps:
		return Verdict{RequeuePoll, fmt.Sprintf("%s of one object at a fixed period, unwritten between %d of %d reads", f.Verb, t.Gaps-f.WrittenBetween, t.Gaps)}
	case f.Verb == "list" && !f.Named && f.After410 > 0:
		return Verdict{Relist, fmt.Sprintf("%d lists of the whole collection, %d after a 410 Gone", f.Requests, f.After410)}
	case f.Verb == "list" && !f.Named:
		return Verdict{Relist, fmt.Sprintf("%d lists of the whole collection (%d without a resourceVersion: from etcd)", f.Requests, f.NoVersion)}
	}
	return Verdict{Unexplained, "fits no rule"}
}

// round prints a period to a sensible precision.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	default:
		return d.Round(time.Millisecond)
	}
}
