// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// base is when the generated logs start.
var base = time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)

// gen writes audit lines as an API server does: one per stage.
type gen struct {
	buf bytes.Buffer
	n   int
}

// req is one request to write.
type req struct {
	at                   time.Duration
	user, ua, verb       string
	group, resource, sub string
	ns, name, query      string
	code                 int
	rv                   string // responseObject's resourceVersion (RequestResponse level)
}

func (g *gen) add(r req, stages ...string) {
	g.n++
	if len(stages) == 0 {
		stages = []string{StageRequestReceived, StageResponseComplete}
		if r.verb == "watch" {
			stages = []string{StageRequestReceived, StageResponseStarted, StageResponseComplete}
		}
	}
	if r.code == 0 {
		r.code = 200
	}
	uri := "/api/v1/"
	if r.group != "" {
		uri = "/apis/" + r.group + "/v1/"
	}
	if r.ns != "" {
		uri += "namespaces/" + r.ns + "/"
	}
	uri += r.resource
	if r.name != "" {
		uri += "/" + r.name
	}
	if r.query != "" {
		uri += "?" + r.query
	}
	for _, st := range stages {
		ev := map[string]any{
			"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
			"auditID": fmt.Sprintf("id-%d", g.n), "stage": st, "requestURI": uri, "verb": r.verb,
			"user": map[string]any{"username": r.user}, "userAgent": r.ua,
			"objectRef":                map[string]any{"resource": r.resource, "namespace": r.ns, "name": r.name, "apiGroup": r.group, "apiVersion": "v1", "subresource": r.sub},
			"requestReceivedTimestamp": base.Add(r.at).Format(time.RFC3339Nano),
			"stageTimestamp":           base.Add(r.at + time.Millisecond).Format(time.RFC3339Nano),
		}
		if st != StageRequestReceived {
			ev["responseStatus"] = map[string]any{"code": r.code}
		}
		if r.rv != "" && st == StageResponseComplete {
			ev["level"] = "RequestResponse"
			ev["responseObject"] = map[string]any{"metadata": map[string]any{"resourceVersion": r.rv}}
		}
		b, _ := json.Marshal(ev)
		g.buf.Write(b)
		g.buf.WriteByte('\n')
	}
}

// every adds n requests of r, period apart, each shifted by jitter(i).
func (g *gen) every(r req, start, period time.Duration, n int) {
	for i := 0; i < n; i++ {
		r.at = start + time.Duration(i)*period + time.Duration(i%3)*period/50
		g.add(r)
	}
}

func analyse(t *testing.T, logs ...[]byte) Report {
	t.Helper()
	var rd Reader
	a := NewAnalyzer(Limits{}, time.Time{}, time.Time{})
	for _, l := range logs {
		if err := rd.Read(bytes.NewReader(l), a.Add); err != nil {
			t.Fatal(err)
		}
	}
	return a.Report(rd.Coverage())
}

// find returns the stream of client on verb and resource (and object).
func find(t *testing.T, rep Report, client, verb, resource, object string) Stream {
	t.Helper()
	for _, c := range rep.Clients {
		if c.Name != client {
			continue
		}
		for _, s := range c.Streams {
			if s.Verb == verb && s.Resource == resource && (object == "" || s.Object() == object) {
				return s
			}
		}
	}
	t.Fatalf("no stream %s %s %s of %s in %+v", verb, resource, object, client, rep.Clients)
	return Stream{}
}

const (
	ctrlUA = "my-controller/v0.3.1 (linux/amd64) kubernetes/0123abc"
	kcmUA  = "kube-controller-manager/v1.37.1 (linux/amd64) kubernetes/abc/system:serviceaccount:kube-system:job-controller"
)

func TestDetectorsNameEachCause(t *testing.T) {
	cm := req{user: "u", ua: ctrlUA, resource: "configmaps", ns: "a"}
	tests := []struct {
		name                   string
		build                  func(g *gen)
		client, verb, resource string
		object                 string
		want                   Cause
		period                 time.Duration
	}{{
		name: "lease renewal",
		build: func(g *gen) {
			g.every(req{user: "u", ua: ctrlUA, verb: "update", group: "coordination.k8s.io", resource: "leases", ns: "k", name: "lock"}, 0, 2*time.Second, 20)
		},
		client: "my-controller", verb: "update", resource: "coordination.k8s.io/leases", want: LeaseRenewal, period: 2 * time.Second,
	}, {
		name: "watch restart",
		build: func(g *gen) {
			g.every(req{user: "u", ua: ctrlUA, verb: "watch", resource: "pods", query: "resourceVersion=5&timeoutSeconds=300&watch=true"}, 0, 5*time.Minute, 6)
		},
		client: "my-controller", verb: "watch", resource: "pods", want: WatchRestart, period: 5 * time.Minute,
	}, {
		name: "relist without resourceVersion",
		build: func(g *gen) {
			g.every(req{user: "u", ua: ctrlUA, verb: "list", resource: "pods", query: "limit=500"}, 0, time.Minute, 5)
		},
		client: "my-controller", verb: "list", resource: "pods", want: Relist, period: time.Minute,
	}, {
		name: "one list is an informer starting",
		build: func(g *gen) {
			g.add(req{user: "u", ua: ctrlUA, verb: "list", resource: "pods", query: "limit=500&resourceVersion=0"})
		},
		client: "my-controller", verb: "list", resource: "pods", want: InitialList,
	}, {
		name: "one streaming list is an informer starting",
		build: func(g *gen) {
			g.add(req{user: "u", ua: ctrlUA, verb: "watch", resource: "pods", query: "sendInitialEvents=true&watch=true"})
		},
		client: "my-controller", verb: "watch", resource: "pods", want: InitialList,
	}, {
		name: "relist after a 410",
		build: func(g *gen) {
			g.add(req{at: 0, user: "u", ua: ctrlUA, verb: "list", resource: "pods", query: "resourceVersion=9", code: 410})
			g.add(req{at: time.Second, user: "u", ua: ctrlUA, verb: "list", resource: "pods", query: "resourceVersion=10"})
		},
		client: "my-controller", verb: "list", resource: "pods", want: Relist,
	}, {
		name: "streaming relist",
		build: func(g *gen) {
			g.every(req{user: "u", ua: ctrlUA, verb: "watch", resource: "pods", query: "sendInitialEvents=true&allowWatchBookmarks=true&watch=true"}, 0, time.Minute, 3)
		},
		client: "my-controller", verb: "watch", resource: "pods", want: Relist,
	}, {
		name: "requeue poll of one object, 1.5s",
		build: func(g *gen) {
			r := cm
			r.verb, r.name = "get", "settings"
			g.every(r, 0, 1500*time.Millisecond, 12)
		},
		client: "my-controller", verb: "get", resource: "configmaps", want: RequeuePoll, period: 1500 * time.Millisecond,
	}, {
		name: "poll through a list by name",
		build: func(g *gen) {
			r := cm
			r.verb, r.query = "list", "fieldSelector=metadata.name%3Dsettings"
			g.every(r, 0, 15*time.Second, 8)
		},
		client: "my-controller", verb: "list", resource: "configmaps", object: "a/settings", want: RequeuePoll, period: 15 * time.Second,
	}, {
		name: "reads of an object written between them are not a poll",
		build: func(g *gen) {
			r := cm
			r.verb, r.name = "get", "settings"
			g.every(r, 0, 10*time.Second, 8)
			w := cm
			w.user, w.ua, w.verb, w.name = "someone", "kubectl/v1.37.1 (linux/amd64) kubernetes/abc", "update", "settings"
			g.every(w, 5*time.Second, 10*time.Second, 8)
		},
		client: "my-controller", verb: "get", resource: "configmaps", want: Unexplained,
	}, {
		name: "resync: bursts over every object of a kind",
		build: func(g *gen) {
			for burst := 0; burst < 5; burst++ {
				for i := 0; i < 6; i++ {
					r := cm
					r.verb, r.name = "get", fmt.Sprintf("obj-%d", i)
					r.at = time.Duration(burst)*30*time.Second + time.Duration(i)*10*time.Millisecond
					g.add(r)
				}
			}
		},
		client: "my-controller", verb: "get", resource: "configmaps", object: "a/obj-3", want: Resync, period: 30 * time.Second,
	}, {
		name: "status heartbeat",
		build: func(g *gen) {
			r := req{user: "u", ua: ctrlUA, verb: "patch", group: "example.com", resource: "widgets", sub: "status", ns: "a", name: "w"}
			g.every(r, 0, 10*time.Second, 10)
		},
		client: "my-controller", verb: "patch", resource: "example.com/widgets/status", want: Heartbeat, period: 10 * time.Second,
	}, {
		name: "hot loop",
		build: func(g *gen) {
			r := cm
			r.verb, r.name = "update", "busy"
			g.every(r, 0, 150*time.Millisecond, 30)
		},
		client: "my-controller", verb: "update", resource: "configmaps", want: HotLoop,
	}, {
		name: "a burst of four writes converging is no loop",
		build: func(g *gen) {
			for _, at := range []time.Duration{0, 20, 90, 100} {
				r := cm
				r.verb, r.name, r.at = "patch", "admin", at*time.Millisecond
				g.add(r)
			}
		},
		client: "my-controller", verb: "patch", resource: "configmaps", want: Unexplained,
	}, {
		name: "fight",
		build: func(g *gen) {
			for i := 0; i < 10; i++ {
				ua := "writer-a/v1"
				if i%2 == 1 {
					ua = "writer-b/v1"
				}
				g.add(req{at: time.Duration(i) * 3 * time.Second, user: "u", ua: ua, verb: "patch", resource: "configmaps", ns: "a", name: "contested"})
			}
		},
		client: "writer-a", verb: "patch", resource: "configmaps", want: Fight,
	}, {
		name: "a single create fits no rule",
		build: func(g *gen) {
			g.add(req{user: "u", ua: ctrlUA, verb: "create", resource: "configmaps", ns: "a", name: "x"})
		},
		client: "my-controller", verb: "create", resource: "configmaps", want: Unexplained,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var g gen
			tc.build(&g)
			s := find(t, analyse(t, g.buf.Bytes()), tc.client, tc.verb, tc.resource, tc.object)
			if s.Cause != tc.want {
				t.Fatalf("cause %s (%s), want %s", s.Cause, s.Reason, tc.want)
			}
			if tc.period > 0 {
				got := time.Duration(s.PeriodSeconds * float64(time.Second))
				if !near(got, tc.period) {
					t.Fatalf("period %s, want %s", got, tc.period)
				}
			}
		})
	}
}

func TestHeartbeatTellsWritesThatChangedNothing(t *testing.T) {
	var g gen
	for i := 0; i < 8; i++ {
		rv := "100"
		if i == 3 {
			rv = "101"
		}
		g.add(req{at: time.Duration(i) * 10 * time.Second, user: "u", ua: ctrlUA, verb: "update", resource: "configmaps", sub: "status", ns: "a", name: "s", rv: rv})
	}
	s := find(t, analyse(t, g.buf.Bytes()), "my-controller", "update", "configmaps/status", "")
	if s.Cause != Heartbeat || !strings.Contains(s.Reason, "5 of 7 changed nothing") {
		t.Fatalf("got %s: %s", s.Cause, s.Reason)
	}
}

func TestClientNameDropsVersionNoise(t *testing.T) {
	for ua, want := range map[string]string{
		kcmUA: "kube-controller-manager/system:serviceaccount:kube-system:job-controller",
		"kube-controller-manager/v1.37.1 (linux/amd64) kubernetes/abc/namespace-controller": "kube-controller-manager/namespace-controller",
		"kubectl/v1.37.1 (linux/amd64) kubernetes/7e2b1c4":                                  "kubectl",
		"Go-http-client/2.0": "Go-http-client",
		"":                   "-",
		"vidra/v0.1.0 (linux/arm64) kubernetes/$Format": "vidra",
		"curl/8.5.0": "curl",
	} {
		if got := ClientName(ua); got != want {
			t.Errorf("ClientName(%q) = %q, want %q", ua, got, want)
		}
	}
}

func TestReaderDedupesStagesAndCountsBadLines(t *testing.T) {
	var g gen
	g.add(req{user: "u", ua: ctrlUA, verb: "get", resource: "pods", ns: "a", name: "p"})
	g.add(req{at: time.Second, user: "u", ua: ctrlUA, verb: "watch", resource: "pods", query: "watch=true&resourceVersion=1"})
	// A request seen at RequestReceived only.
	g.add(req{at: 2 * time.Second, user: "u", ua: ctrlUA, verb: "get", resource: "pods", ns: "a", name: "q"}, StageRequestReceived)
	log := g.buf.String() + "not json\n{\"kind\":\"Event\"}\n" + strings.Repeat("x", 3000) + "\n\n"
	// The same log twice: a rotated copy read again.
	var rd Reader
	rd.MaxLine = 2000
	var got []Request
	for range 2 {
		if err := rd.Read(strings.NewReader(log), func(r Request) { got = append(got, r) }); err != nil {
			t.Fatal(err)
		}
	}
	cov := rd.Coverage()
	if len(got) != 2 || cov.Requests != 2 {
		t.Fatalf("requests %d (%d), want 2", len(got), cov.Requests)
	}
	if cov.Malformed != 4 || cov.TooLong != 2 || cov.OnlyReceived != 1 {
		t.Fatalf("coverage %+v", cov)
	}
	// The watch's ResponseComplete in the first pass, and every one of the
	// six events again in the second.
	if cov.Deduplicated != 1+6 {
		t.Fatalf("deduplicated %d, want 7", cov.Deduplicated)
	}
	if got[1].Verb != "watch" || got[1].ResourceVersion != "1" || got[1].Code != 200 {
		t.Fatalf("watch read as %+v", got[1])
	}
}

func TestReaderReadsGzip(t *testing.T) {
	var g gen
	g.every(req{user: "u", ua: ctrlUA, verb: "get", resource: "pods", ns: "a", name: "p"}, 0, time.Second, 5)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(g.buf.Bytes())
	_ = zw.Close()
	rep := analyse(t, z.Bytes())
	if rep.Coverage.Requests != 5 || rep.Coverage.Malformed != 0 {
		t.Fatalf("coverage %+v", rep.Coverage)
	}
}

func TestHostileLogIsFoldedWithinBounds(t *testing.T) {
	var g gen
	for i := 0; i < 50; i++ {
		g.add(req{at: time.Duration(i) * time.Millisecond, user: strings.Repeat("u", 10000), ua: fmt.Sprintf("c%d/v1", i), verb: "update", resource: "configmaps", ns: "a", name: fmt.Sprintf("o%d", i)})
	}
	var rd Reader
	a := NewAnalyzer(Limits{Clients: 5, Streams: 10, Objects: 7, Times: 4}, time.Time{}, time.Time{})
	if err := rd.Read(bytes.NewReader(g.buf.Bytes()), a.Add); err != nil {
		t.Fatal(err)
	}
	rep := a.Report(rd.Coverage())
	if len(rep.Clients) != 6 {
		t.Fatalf("%d clients, want 5 and (other)", len(rep.Clients))
	}
	if rep.Folded.Clients != 45 || rep.Folded.Streams != 40 || rep.Folded.Objects != 43 {
		t.Fatalf("folded %+v", rep.Folded)
	}
	for _, c := range rep.Clients {
		if len(c.User) > maxField {
			t.Fatalf("user of %d bytes kept", len(c.User))
		}
	}
	if len(rep.Warnings) == 0 {
		t.Fatal("no warning for what was folded")
	}
}

func TestReportWarnsWhenReadsAreDropped(t *testing.T) {
	var g gen
	g.every(req{user: "u", ua: ctrlUA, verb: "update", resource: "configmaps", ns: "a", name: "x"}, 0, time.Second, 5)
	rep := analyse(t, g.buf.Bytes())
	if !strings.Contains(strings.Join(rep.Warnings, "\n"), "drops reads") {
		t.Fatalf("warnings %q", rep.Warnings)
	}
}

func TestSinceUntilKeepsTheWindow(t *testing.T) {
	var g gen
	g.every(req{user: "u", ua: ctrlUA, verb: "get", resource: "pods", ns: "a", name: "p"}, 0, time.Second, 10)
	var rd Reader
	a := NewAnalyzer(Limits{}, base.Add(2*time.Second), base.Add(6*time.Second))
	if err := rd.Read(bytes.NewReader(g.buf.Bytes()), a.Add); err != nil {
		t.Fatal(err)
	}
	rep := a.Report(rd.Coverage())
	if rep.Clients[0].Requests != 4 || rep.OutOfWindow != 6 || rep.Hours*3600 != 4 {
		t.Fatalf("requests %d, out %d, hours %v", rep.Clients[0].Requests, rep.OutOfWindow, rep.Hours)
	}
}

func TestBudgets(t *testing.T) {
	rep := Report{Clients: []Client{{Name: "vidra", User: "system:serviceaccount:vidra-system:vidra", PerHour: 40}, {Name: "poller", User: "u", PerHour: 2400}}}
	tests := []struct {
		flag   string
		ok     bool
		parses bool
	}{
		{"vidra=60/h", true, true},
		{"vidra=1/m", true, true},
		{"vidra=30", false, true},
		{"system:serviceaccount:vidra-system:vidra=50/h", true, true},
		{"poller=1000/h", false, true},
		{"nobody=1000/h", false, true},
		{"vidra", false, false},
		{"vidra=-1/h", false, false},
		{"vidra=1/d", false, false},
	}
	for _, tc := range tests {
		b, err := ParseBudget(tc.flag)
		if (err == nil) != tc.parses {
			t.Fatalf("ParseBudget(%q): %v", tc.flag, err)
		}
		if err != nil {
			continue
		}
		if got := CheckBudgets(rep, []Budget{b})[0]; got.OK != tc.ok {
			t.Errorf("%s: %+v, want ok=%v", tc.flag, got, tc.ok)
		}
	}
}

func TestPlotEscapesClientNames(t *testing.T) {
	var g gen
	g.every(req{user: "<script>\x1b[31m", ua: "evil/v1", verb: "get", resource: "pods", ns: "a", name: "p"}, 0, time.Second, 5)
	var out bytes.Buffer
	if err := WritePlot(&out, analyse(t, g.buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	svg := out.String()
	if strings.Contains(svg, "<script>") || strings.Contains(svg, "\x1b") {
		t.Fatalf("raw log bytes in the plot:\n%s", svg)
	}
	if strings.Count(svg, `stroke="`+causeColor[RequeuePoll]+`"`) != 5 {
		t.Fatalf("want 5 requeue-poll marks:\n%s", svg)
	}
}

func TestDedupeWindowStaysBounded(t *testing.T) {
	var g gen
	for i := 0; i < 10; i++ {
		g.add(req{at: time.Duration(i) * time.Second, user: "u", ua: ctrlUA, verb: "get", resource: "pods", ns: "a", name: "p"}, StageRequestReceived)
	}
	rd := Reader{DedupeWindow: 4}
	if err := rd.Read(bytes.NewReader(g.buf.Bytes()), func(Request) {}); err != nil {
		t.Fatal(err)
	}
	if len(rd.seen) > 4 || len(rd.ring) > 4 {
		t.Fatalf("window holds %d ids, ring %d, want at most 4", len(rd.seen), len(rd.ring))
	}
	if c := rd.Coverage(); c.OnlyReceived != 10 {
		t.Fatalf("only received %d, want 10", c.OnlyReceived)
	}
}

func TestPlotIsBounded(t *testing.T) {
	rep := Report{From: base, To: base.Add(time.Hour)}
	for i := 0; i < plotLanes+50; i++ {
		c := Client{Name: fmt.Sprintf("c%d", i)}
		for j := 0; j < 20; j++ {
			s := Stream{Verdict: Verdict{Cause: Unexplained}}
			for k := 0; k < 256; k++ {
				s.Times = append(s.Times, base.Add(time.Duration(k)*time.Second))
			}
			c.Streams = append(c.Streams, s)
		}
		rep.Clients = append(rep.Clients, c)
	}
	var out bytes.Buffer
	if err := WritePlot(&out, rep); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "<line"); n > plotLanes*plotMarks+1 {
		t.Fatalf("%d marks", n)
	}
	if !strings.Contains(out.String(), "the worst 100 of 150 clients") {
		t.Fatal("the title does not say clients were left out")
	}
}
