// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups

import (
	"hash/fnv"
	"slices"
	"time"
)

// Limits bound what an Analyzer keeps, whatever the log holds: past them,
// clients and streams are folded into an "(other)" bucket and objects are
// not followed, and Report counts what was folded.
type Limits struct {
	// Clients is the most clients told apart; later ones are one "(other)"
	// client.
	Clients int
	// Streams is the most streams, over all clients; a client's later
	// streams are its "(other)" stream.
	Streams int
	// Objects is the most objects whose writes are followed (for polls,
	// fights); later ones are not followed.
	Objects int
	// Times is how many of the latest request times each stream keeps
	// for its period, jitter and plot.
	Times int
}

// DefaultLimits keep an analysis within about 100 MB, whatever the log.
var DefaultLimits = Limits{Clients: 1000, Streams: 20000, Objects: 100000, Times: 256}

// objectWrites is how many of the latest writes of each object are kept,
// to find writers taking turns and writes between two polls.
const objectWrites = 8

// burstGap is the silence that ends a burst of a resync: the requests of
// one resync follow each other closer than this.
const burstGap = time.Second

// burstObjects is how many distinct objects make a burst a resync.
const burstObjects = 3

// other names the folded clients and streams.
const other = "(other)"

// Analyzer folds Requests into statistics per client and per stream.
// Add them in the order the log holds them; Report decides.
type Analyzer struct {
	limits       Limits
	since, until time.Time

	clients map[clientKey]*clientState
	order   []*clientState
	streams map[streamKey]*streamState
	objects map[objectKey]*objectState
	groups  map[groupKey]*groupState
	gone    map[groupKey]bool

	first, last int64
	nStreams    int
	folded      Folded
	outOfWindow int64
	reads       int64
	writes      int64
}

// Folded counts what went past the Limits.
type Folded struct {
	// Clients and Streams count the requests folded into "(other)".
	Clients int64 `json:"clients"`
	Streams int64 `json:"streams"`
	// Objects counts the writes and reads of objects not followed.
	Objects int64 `json:"objects"`
}

type clientKey struct{ user, name string }

type clientState struct {
	id       int
	key      clientKey
	requests int64
}

type streamKey struct {
	client                       int
	verb                         string
	group, resource, subresource string
	namespace, name, selector    string
	path                         string
	initial                      bool
}

type streamState struct {
	key      streamKey
	n        int64
	times    []int64 // a ring of the latest Limits.Times request times
	next     int
	noRV     int64
	after410 int64
	// lastVersion is the resourceVersion the last write returned; a write
	// returning the same one changed nothing.
	lastVersion string
	unchanged   int64
	known       int64
}

type objectKey struct{ group, resource, namespace, name string }

type objectState struct {
	writes [objectWrites]write
	n      int
}

type write struct {
	at     int64
	client int
}

type groupKey struct {
	client                       int
	verb                         string
	group, resource, subresource string
}

// groupState follows the requests of one client and verb over all the
// objects of a kind, for resyncs: bursts over many objects at a period.
type groupState struct {
	last, start int64
	size        int64 // distinct objects of the burst, up to burstObjects
	objects     [burstObjects]uint64
	starts      []int64 // ring of burst starts
	sizes       []int64 // ring of burst sizes, aligned with starts
	next        int
}

// NewAnalyzer returns an Analyzer keeping within limits (zero fields take
// DefaultLimits') and counting only requests received in [since, until)
// (zero: unbounded).
func NewAnalyzer(limits Limits, since, until time.Time) *Analyzer {
	if limits.Clients <= 0 {
		limits.Clients = DefaultLimits.Clients
	}
	if limits.Streams <= 0 {
		limits.Streams = DefaultLimits.Streams
	}
	if limits.Objects <= 0 {
		limits.Objects = DefaultLimits.Objects
	}
	if limits.Times <= 1 {
		limits.Times = DefaultLimits.Times
	}
	return &Analyzer{
		limits:  limits,
		since:   since,
		until:   until,
		clients: map[clientKey]*clientState{},
		streams: map[streamKey]*streamState{},
		objects: map[objectKey]*objectState{},
		groups:  map[groupKey]*groupState{},
		gone:    map[groupKey]bool{},
	}
}

// Add counts one request.
func (a *Analyzer) Add(r Request) {
	if (!a.since.IsZero() && r.Time.Before(a.since)) || (!a.until.IsZero() && !r.Time.Before(a.until)) {
		a.outOfWindow++
		return
	}
	t := r.Time.UnixNano()
	if a.first == 0 || t < a.first {
		a.first = t
	}
	if t > a.last {
		a.last = t
	}
	c := a.client(r)
	c.requests++
	s := a.stream(c, r)
	s.n++
	s.record(t, a.limits.Times)
	if IsWrite(r.Verb) {
		a.writes++
	} else if IsRead(r.Verb) {
		a.reads++
	}
	if (r.Verb == "list" || r.Verb == "watch") && r.ResourceVersion == "" {
		s.noRV++
	}
	gk := groupKey{client: c.id, verb: r.Verb, group: r.Group, resource: r.Resource, subresource: r.Subresource}
	g := a.groups[gk]
	if g == nil && len(a.groups) < a.limits.Streams {
		g = &groupState{}
		a.groups[gk] = g
	}
	if r.Verb == "list" || r.Verb == "watch" {
		// A list after a list or watch answered 410 Gone is a relist the
		// API server asked for.
		lk := gk
		lk.verb = "list|watch"
		gone, known := a.gone[lk]
		if r.Verb == "list" && gone {
			s.after410++
		}
		if known || len(a.gone) < a.limits.Streams {
			a.gone[lk] = r.Code == 410
		}
	}
	if g != nil && r.Name != "" {
		g.add(t, r.Namespace+"/"+r.Name)
	}
	if r.Name != "" && r.Resource != "" {
		a.object(r, c.id, t)
	}
	if IsWrite(r.Verb) && r.ResponseVersion != "" {
		if s.lastVersion != "" {
			s.known++
			if s.lastVersion == r.ResponseVersion {
				s.unchanged++
			}
		}
		s.lastVersion = r.ResponseVersion
	}
}

func (a *Analyzer) client(r Request) *clientState {
	k := clientKey{user: r.User, name: ClientName(r.UserAgent)}
	if c := a.clients[k]; c != nil {
		return c
	}
	if len(a.clients) >= a.limits.Clients {
		k = clientKey{user: other, name: other}
		a.folded.Clients++
		if c := a.clients[k]; c != nil {
			return c
		}
	}
	c := &clientState{id: len(a.order), key: k}
	a.clients[k] = c
	a.order = append(a.order, c)
	return c
}

func (a *Analyzer) stream(c *clientState, r Request) *streamState {
	k := streamKey{
		client: c.id, verb: r.Verb, group: r.Group, resource: r.Resource, subresource: r.Subresource,
		namespace: r.Namespace, name: r.Name, selector: r.Selector, path: r.Path,
		initial: r.SendInitialEvents,
	}
	if s := a.streams[k]; s != nil {
		return s
	}
	if a.nStreams >= a.limits.Streams {
		a.folded.Streams++
		k = streamKey{client: c.id, verb: other}
		if s := a.streams[k]; s != nil {
			return s
		}
		// One "(other)" stream per client, beyond the bound: clients are
		// bounded themselves.
	} else {
		a.nStreams++
	}
	s := &streamState{key: k}
	a.streams[k] = s
	return s
}

func (a *Analyzer) object(r Request, client int, t int64) {
	k := objectKey{group: r.Group, resource: r.Resource, namespace: r.Namespace, name: r.Name}
	o := a.objects[k]
	if o == nil {
		if len(a.objects) >= a.limits.Objects {
			a.folded.Objects++
			return
		}
		if !IsWrite(r.Verb) {
			// Only written objects are followed: a read of an object no
			// one writes needs no state to be a poll.
			return
		}
		o = &objectState{}
		a.objects[k] = o
	}
	if IsWrite(r.Verb) {
		o.writes[o.n%objectWrites] = write{at: t, client: client}
		o.n++
	}
}

// record keeps t in the ring of the latest times.
func (s *streamState) record(t int64, max int) {
	if len(s.times) < max {
		s.times = append(s.times, t)
		return
	}
	s.times[s.next] = t
	s.next = (s.next + 1) % max
}

// add counts a request of the group in its burst, starting a new burst
// after a silence of burstGap.
func (g *groupState) add(t int64, object string) {
	if g.size > 0 && t-g.last < int64(burstGap) && t >= g.last {
		g.last = t
		g.see(object)
		return
	}
	g.closeBurst()
	g.start, g.last = t, t
	g.see(object)
}

// see counts object in the burst's distinct objects, up to burstObjects:
// enough to tell a burst over a kind from one object read again.
func (g *groupState) see(object string) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(object))
	id := h.Sum64()
	if int(g.size) < burstObjects && !slices.Contains(g.objects[:g.size], id) {
		g.objects[g.size] = id
		g.size++
	}
}

// closeBurst records the current burst.
func (g *groupState) closeBurst() {
	if g.size == 0 {
		return
	}
	const keep = 64
	if len(g.starts) < keep {
		g.starts = append(g.starts, g.start)
		g.sizes = append(g.sizes, g.size)
	} else {
		g.starts[g.next] = g.start
		g.sizes[g.next] = g.size
		g.next = (g.next + 1) % keep
	}
	g.size = 0
}

// sortedTimes returns the stream's kept times in order.
func sortedTimes(ts []int64) []int64 {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s
}
