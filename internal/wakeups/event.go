// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"time"
)

// Audit stages, as the API server writes them.
const (
	StageRequestReceived  = "RequestReceived"
	StageResponseStarted  = "ResponseStarted"
	StageResponseComplete = "ResponseComplete"
	StagePanic            = "Panic"
)

// maxField bounds every string kept from a log line (user, user agent,
// names, selectors): what the analysis holds is then bounded by its counts
// times this, whatever a hostile log writes.
const maxField = 256

// event is the part of an audit.k8s.io/v1 Event the analysis reads; the
// decoder skips the rest (request and response bodies included) without
// keeping it.
type event struct {
	Kind       string `json:"kind"`
	Level      string `json:"level"`
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent      string          `json:"userAgent"`
	ObjectRef      *objectRef      `json:"objectRef"`
	ResponseStatus *responseStatus `json:"responseStatus"`
	// ResponseObject is recorded at level RequestResponse only: its
	// resourceVersion tells whether a write changed anything.
	ResponseObject           *responseObject `json:"responseObject"`
	RequestReceivedTimestamp time.Time       `json:"requestReceivedTimestamp"`
}

type objectRef struct {
	Resource    string `json:"resource"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	APIGroup    string `json:"apiGroup"`
	Subresource string `json:"subresource"`
}

type responseStatus struct {
	Code int `json:"code"`
}

type responseObject struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
}

// Request is one API request, as the analysis sees it: once, whatever
// number of stages the log recorded for it.
type Request struct {
	// Time is when the API server received it.
	Time time.Time
	User string
	// UserAgent is as sent; Client names it without version noise.
	UserAgent string
	Verb      string
	// Group, Resource and Subresource are those of objectRef; a request
	// without one (a non-resource URL such as /healthz) has Resource empty
	// and Path set.
	Group, Resource, Subresource string
	Namespace, Name              string
	// Path is the request's path without its query, for non-resource
	// requests.
	Path string
	// Selector is the label and field selector of a list or watch,
	// "label=...;field=...", empty if none (a field selector on
	// metadata.name is taken as Name instead).
	Selector string
	// ResourceVersion is the resourceVersion a list or watch asked from
	// ("" when none).
	ResourceVersion string
	// SendInitialEvents is a watch that starts with a list (a streaming
	// list: what a relist is with the WatchList feature).
	SendInitialEvents bool
	// Code is the response's HTTP status, 0 when the log has none (a
	// watch counted when it started streaming).
	Code int
	// ResponseVersion is the resourceVersion of the object a write
	// returned, at level RequestResponse only.
	ResponseVersion string
}

var (
	errNotEvent = errors.New("not an audit.k8s.io Event")
	errNoID     = errors.New("no auditID")
)

// decode reads one line into an event.
func decode(line []byte, ev *event) error {
	if !scanEvent(line, ev) {
		*ev = event{}
		if err := json.Unmarshal(line, ev); err != nil {
			return err
		}
	}
	if ev.Kind != "" && ev.Kind != "Event" {
		return errNotEvent
	}
	if ev.AuditID == "" {
		return errNoID
	}
	if ev.Stage == "" || ev.RequestReceivedTimestamp.IsZero() {
		return errNotEvent
	}
	return nil
}

// request turns an event into a Request, with every string bounded.
func (ev *event) request() Request {
	r := Request{
		Time:      ev.RequestReceivedTimestamp,
		User:      clip(ev.User.Username),
		UserAgent: clip(ev.UserAgent),
		Verb:      clip(ev.Verb),
	}
	if ev.ObjectRef != nil {
		r.Group = clip(ev.ObjectRef.APIGroup)
		r.Resource = clip(ev.ObjectRef.Resource)
		r.Subresource = clip(ev.ObjectRef.Subresource)
		r.Namespace = clip(ev.ObjectRef.Namespace)
		r.Name = clip(ev.ObjectRef.Name)
	}
	if ev.ResponseStatus != nil {
		r.Code = ev.ResponseStatus.Code
	}
	if ev.ResponseObject != nil {
		r.ResponseVersion = clip(ev.ResponseObject.Metadata.ResourceVersion)
	}
	path, rawQuery, _ := strings.Cut(ev.RequestURI, "?")
	if r.Resource == "" {
		r.Path = clip(path)
	}
	if rawQuery == "" || (r.Verb != "list" && r.Verb != "watch") {
		return r
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		// A query the API server accepted parses; one that does not is
		// kept whole as the selector, so that it still makes a stream.
		r.Selector = clip(rawQuery)
		return r
	}
	r.ResourceVersion = clip(q.Get("resourceVersion"))
	r.SendInitialEvents = q.Get("sendInitialEvents") == "true"
	var sel []string
	if l := q.Get("labelSelector"); l != "" {
		sel = append(sel, "label="+l)
	}
	if f := q.Get("fieldSelector"); f != "" {
		if name, ok := strings.CutPrefix(f, "metadata.name="); ok && !strings.Contains(name, ",") && r.Name == "" {
			r.Name = clip(name)
		} else {
			sel = append(sel, "field="+f)
		}
	}
	r.Selector = clip(strings.Join(sel, ";"))
	return r
}

// clip bounds s to maxField bytes, cut between runes.
func clip(s string) string {
	if len(s) <= maxField {
		return s
	}
	cut := maxField
	for cut > 0 && !startsRune(s[cut]) {
		cut--
	}
	return s[:cut]
}

func startsRune(b byte) bool { return b&0xc0 != 0x80 }

// IsWrite tells the verbs that change an object.
func IsWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection", "apply":
		return true
	}
	return false
}

// IsRead tells the verbs that read.
func IsRead(verb string) bool { return verb == "get" || verb == "list" || verb == "watch" }
