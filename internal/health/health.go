// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package health

import (
	"fmt"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/vidra-operator/vidra/internal/wording"
)

// Status is an object's health. Its values are kstatus' statuses, spelled
// as kstatus spells them, since they are written to the API.
type Status string

// The health an object can have.
const (
	// Current means the object exists and its controller has made it what
	// its spec asks: a Deployment available, a Job complete, a ConfigMap
	// present.
	Current Status = Status(status.CurrentStatus)
	// InProgress means the object is on its way: a rollout, a pending Pod,
	// a generation its controller has not observed yet.
	InProgress Status = Status(status.InProgressStatus)
	// Failed means the object will not get there without a change: a
	// Deployment past its progress deadline, a failed Job, Stalled=True.
	Failed Status = Status(status.FailedStatus)
	// Terminating means the object has a deletionTimestamp.
	Terminating Status = Status(status.TerminatingStatus)
	// NotFound means the object does not exist.
	NotFound Status = Status(status.NotFoundStatus)
	// Unknown means the object's status could not be read, for instance
	// because a field has a type its API does not give it.
	Unknown Status = Status(status.UnknownStatus)
)

// MaxMessage is the most bytes a message Of returns has: it ends up in the
// owner's status next to every other managed object's, and a condition
// message can be as long as whoever wrote it liked.
const MaxMessage = 200

// Ellipsis ends a message cut short, here and where the status is cut to
// its size.
const Ellipsis = "…"

// Of returns the health of u and a short message saying why. A nil u is
// NotFound; an object with a deletionTimestamp is Terminating, whatever its
// status says; one whose status cannot be read is Unknown, with the reason
// in the message. Of only reads u.
func Of(u *unstructured.Unstructured) (Status, string) {
	if u == nil {
		return NotFound, "not found"
	}
	s, msg := compute(u)
	return s, shorten(msg)
}

func compute(u *unstructured.Unstructured) (s Status, msg string) {
	// kstatus asserts the types of some fields without checking them (a
	// Pod's containerStatuses); the API server validates built-in types,
	// but a panic here would take the operator down with it, for one
	// object's status.
	defer func() {
		if r := recover(); r != nil {
			s, msg = Unknown, fmt.Sprintf("cannot compute status: %v", r)
		}
	}()
	res, err := status.Compute(u)
	if err != nil {
		return Unknown, "cannot compute status: " + err.Error()
	}
	s, msg = Status(res.Status), res.Message
	if s == Current {
		if ok, why := loadBalancerReady(u); !ok {
			return InProgress, why
		}
	}
	return s, msg
}

// loadBalancerReady reports whether u, if it is a LoadBalancer Service, has
// its load balancer. kstatus calls such a Service Current as soon as it has
// a cluster IP, which it always has once created; what its users wait for is
// the external address. As Helm's readiness check does, a Service with
// spec.externalIPs needs no ingress.
func loadBalancerReady(u *unstructured.Unstructured) (bool, string) {
	if u.GetKind() != "Service" || u.GetAPIVersion() != "v1" {
		return true, ""
	}
	if t, _, _ := unstructured.NestedString(u.Object, "spec", "type"); t != "LoadBalancer" {
		return true, ""
	}
	if ips, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "externalIPs"); nonEmptySlice(ips) {
		return true, ""
	}
	if ing, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "loadBalancer", "ingress"); nonEmptySlice(ing) {
		return true, ""
	}
	return false, "Waiting for the load balancer's ingress address"
}

func nonEmptySlice(v any) bool {
	s, ok := v.([]any)
	return ok && len(s) > 0
}

// shorten makes msg fit on one line of at most MaxMessage bytes: control
// characters (a newline in a condition message) become spaces, invalid UTF-8
// is dropped, and a long message is cut at a rune boundary and ends with an
// ellipsis.
func shorten(msg string) string {
	if len(msg) <= MaxMessage && printableASCII(msg) {
		return msg
	}
	msg = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(msg, ""))
	msg = strings.TrimSpace(msg)
	if len(msg) <= MaxMessage {
		return msg
	}
	return strings.TrimRight(wording.Cut(msg, MaxMessage-len(Ellipsis), ""), " ") + Ellipsis
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
