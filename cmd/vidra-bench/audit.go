// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"
)

// auditEvent is the part of an audit.k8s.io/v1 Event the benchmark reads.
type auditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

// auditLog reads the API server's audit log from an offset on.
type auditLog struct{ path string }

// mark is the current end of the log; requests after it are read from there.
func (a auditLog) mark() int64 {
	st, err := os.Stat(a.path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// requests are user's requests received in [from, to), read from
// offset on. A request is counted once: a watch when it starts streaming
// (stage ResponseStarted; a watch that stays open is one request however
// long it lasts), anything else when it completes. A watch refused before it
// streamed has only ResponseComplete and is counted then.
func (a auditLog) requests(user string, offset int64, from, to time.Time) (requestCount, error) {
	f, err := os.Open(a.path)
	if err != nil {
		return requestCount{}, fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return requestCount{}, err
	}
	rc := requestCount{ByVerb: map[string]int{}, ByResource: map[string]int{}}
	started := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 256*1024), 16*1024*1024)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue // a line being written while we read
		}
		if ev.User.Username != user || ev.RequestReceived.Before(from) || !ev.RequestReceived.Before(to) {
			continue
		}
		count := false
		switch {
		case ev.Verb == "watch" && ev.Stage == "ResponseStarted":
			started[ev.AuditID] = true
			count = true
		case ev.Verb == "watch":
			count = ev.Stage == "ResponseComplete" && !started[ev.AuditID]
		default:
			count = ev.Stage == "ResponseComplete" || ev.Stage == "Panic"
		}
		if !count {
			continue
		}
		rc.add(ev)
	}
	return rc, sc.Err()
}

// requestCount is a number of requests by verb and by verb and resource.
type requestCount struct {
	Total      int            `json:"total"`
	Writes     int            `json:"writes"`
	ByVerb     map[string]int `json:"byVerb"`
	ByResource map[string]int `json:"byVerbAndResource"`
}

func (rc *requestCount) add(ev auditEvent) {
	rc.Total++
	rc.ByVerb[ev.Verb]++
	res := "(non-resource)"
	if ev.ObjectRef != nil {
		res = ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
	}
	rc.ByResource[ev.Verb+" "+res]++
	switch ev.Verb {
	case "get", "list", "watch":
	default:
		rc.Writes++
	}
}

// perMinute scales counts taken over window to one minute.
func (rc requestCount) perMinute(window time.Duration) map[string]float64 {
	out := map[string]float64{}
	for v, n := range rc.ByVerb {
		out[v] = round(float64(n)*float64(time.Minute)/float64(window), 1)
	}
	return out
}

// sortedKeys returns the keys of m in order, for stable output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
