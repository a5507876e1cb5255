// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/vidra-operator/vidra/internal/wording"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

const (
	// historySize is how many drift corrections status.driftHistory keeps.
	historySize = 10
	// maxDriftFields bounds the fields one drift record lists: a replaced
	// object would list all of them, and status has a size limit.
	maxDriftFields = 16
	// maxHandEditLeaves bounds the leaves of a hand edit looked at for a
	// drift record. Leaves below maxPointer's worth of path all read as the
	// same cut pointer, so a hand edit of thousands of fields a thousand
	// levels deep would never fill the record and be walked whole, each
	// leaf at the cost of its depth: seconds, and hundreds of MB.
	maxHandEditLeaves = 256
	// maxManagerLabels and maxKindLabels bound the manager and kind label
	// values of the drift metrics. Any client names its field manager
	// freely, and a tenant's own server serves whatever kinds it likes, so
	// a tenant could otherwise grow the operator's metrics without bound.
	// maxLabelBytes bounds one value: a field manager's name is at most 128
	// bytes, a kind's 63.
	maxManagerLabels = 32
	maxKindLabels    = 64
	maxLabelBytes    = 128
)

// driftOf describes how live differs from p's desired object, to be listed
// (driftPolicy Report) or recorded with its correction. live nil means the
// object was deleted. hand are live's hand edits, without ignored fields.
func driftOf(p *planned, live *unstructured.Unstructured, hand handEdits, now time.Time) v1alpha1.DriftRecord {
	// Whole seconds, as the status keeps them: the record the engine
	// remembers must equal its round trip through the API server, or the
	// next reconcile would find the status changed and write it again.
	now = now.Truncate(time.Second)
	r := v1alpha1.DriftRecord{APIVersion: p.obj.GetAPIVersion(), Kind: p.obj.GetKind(), Namespace: p.obj.GetNamespace(), Name: p.obj.GetName()}
	if live == nil {
		r.Deleted, r.Time = true, metav1.NewTime(now)
		return r
	}
	var fields []string
	diffPointers(p.obj.Object, live.Object, nil, &fields)
	// Past maxDriftFields, fields are cut to their first maxDriftFields-1
	// and "…" below: once there are more, those that follow change
	// nothing, and a hand edit can add any number.
	if !hand.unparsed && len(fields) <= maxDriftFields {
		lists := newListLookups()
		listed := make(map[string]bool, len(fields))
		for _, f := range fields {
			listed[f] = true
		}
		examined, more := 0, false
		eachLeafNotIn(hand.fields.Leaves(), p.obj.Object, nil, lists, func(fp fieldpath.Path) bool {
			if examined == maxHandEditLeaves {
				more = true
				return false
			}
			examined++
			if ptr, ok := lists.pointerOf(p.obj.Object, live.Object, fp); ok {
				if f := boundedPointer(ptr); !listed[f] {
					listed[f] = true
					fields = append(fields, f)
				}
			}
			return len(fields) <= maxDriftFields
		})
		if more && len(fields) <= maxDriftFields {
			fields = append(fields, "…")
		}
	}
	if len(fields) > maxDriftFields {
		fields = append(fields[:maxDriftFields-1], "…")
	}
	r.Fields = fields
	r.Manager, r.Time = changedBy(p, live, fields, now)
	return r
}

// maxPointer bounds the length of a pointer in a drift record: keys are
// anyone's to choose, and status has a size limit.
const maxPointer = 256

// boundedPointer is p as a drift record holds it: cut to maxPointer bytes,
// and readable. A key may hold control characters (a newline, an escape)
// and format characters (a bidirectional override, which turns the text
// after it around), and the record is copied into conditions and Events.
func boundedPointer(p pointer) string {
	return wording.Cut(readable(p.String()), maxPointer, "…")
}

// readable is s with each run of bytes that are not UTF-8, and each control
// (Cc) or format (Cf) character, replaced by U+FFFD.
func readable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.In(r, unicode.Cc, unicode.Cf) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// maxManager bounds the field manager a drift record names, as the API
// server bounds the names it accepts. A remote destination's server is
// anyone's to write, and it could name a manager with as many bytes as an
// answer holds, each copied into the status, the Events and the drift
// metric's labels.
const maxManager = 128

// boundedManager is name cut to maxManager bytes, ending with "…" when cut,
// and readable as a pointer is.
func boundedManager(name string) string { return wording.Cut(readable(name), maxManager, "…") }

// marksOnly reports a drift of nothing but Vidra's own labels missing.
func marksOnly(d v1alpha1.DriftRecord) bool {
	if d.Deleted || len(d.Fields) == 0 {
		return false
	}
	for _, f := range d.Fields {
		if f != markPointer {
			return false
		}
	}
	return true
}

// markPointer is the field of the mark added last, the bucket label, which
// objects applied by earlier versions lack.
var markPointer = pointer{"metadata", "labels", v1alpha1.BucketLabel}.String()

// changedBy names the field manager that owns the first of fields on live,
// when its managedFields tell (the cache keeps the field sets of hand-edit
// managers only), else the last writer other than Vidra; and the time of
// its last write, now when that is not known.
//
// A remote destination's server may give an entry the zero time, which a
// status holds as null: the API server would refuse every status write
// with such a record in it.
func changedBy(p *planned, live *unstructured.Unstructured, fields []string, now time.Time) (string, metav1.Time) {
	entries := live.GetManagedFields()
	if len(fields) > 0 {
		if ptr, err := parsePointer(fields[0]); err == nil {
			for _, e := range entries {
				if isVidraManager(e.Manager) || e.FieldsV1 == nil || e.Subresource != "" {
					continue
				}
				set, err := parseFieldsV1(e.FieldsV1)
				if err != nil {
					continue
				}
				if fp, ok := pathIn(set, p.obj.Object, ptr, nil); ok && hasPrefix(set, fp) {
					return boundedManager(e.Manager), timeOr(e.Time, now)
				}
			}
		}
	}
	var who string
	at := metav1.NewTime(now)
	var latest time.Time
	for _, e := range entries {
		if isVidraManager(e.Manager) || e.Time.IsZero() || e.Subresource == "status" {
			continue
		}
		if who == "" || e.Time.After(latest) {
			who, latest, at = e.Manager, e.Time.Time, *e.Time
		}
	}
	return boundedManager(who), at
}

// hasPrefix reports whether set holds a field at or below fp.
func hasPrefix(set *fieldpath.Set, fp fieldpath.Path) bool {
	found := false
	set.Iterate(func(q fieldpath.Path) {
		if !found && len(q) >= len(fp) && q[:len(fp)].Equals(fp) {
			found = true
		}
	})
	return found
}

func timeOr(t *metav1.Time, now time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.NewTime(now)
	}
	return *t
}

// diffPointers appends the pointers of the fields desired sets that live
// does not have, with the same value (see isSubset): lists of the same
// length are compared item by item, others as a whole. It stops past
// maxDriftFields, as many as a drift record tells apart.
func diffPointers(desired, live any, at pointer, out *[]string) {
	if len(*out) > maxDriftFields {
		return
	}
	add := func(p pointer) {
		if len(*out) <= maxDriftFields {
			*out = append(*out, boundedPointer(p))
		}
	}
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			add(at)
			return
		}
		for _, k := range slices.Sorted(maps.Keys(d)) {
			dv := d[k]
			lv, present := l[k]
			// Shared with the siblings' paths: a path is read (made a
			// string by add) before the next one is made, and never kept.
			// A copy per key cost depth times keys, a gigabyte for an object
			// a thousand levels deep.
			p := append(at, k)
			switch {
			case dv == nil:
				if present && lv != nil {
					add(p)
				}
			case !present:
				add(p)
			default:
				diffPointers(dv, lv, p, out)
			}
		}
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			add(at)
			return
		}
		for i := range d {
			diffPointers(d[i], l[i], append(at, strconv.Itoa(i)), out)
		}
	default:
		if !isSubset(desired, live) {
			add(at)
		}
	}
}

// pointerOf converts fp, a path of live's field set, to a JSON pointer. A
// list item is given its position in desired's list when desired has it,
// the form spec.ignore takes, else its position in live.
func pointerOf(desired, live any, fp fieldpath.Path) (pointer, bool) {
	return newListLookups().pointerOf(desired, live, fp)
}

// pointerOf is pointerOf with the lists of desired and live indexed by l,
// once for all the paths of a drift. None is given when l's budget ran out
// before the items were found.
func (l *listLookups) pointerOf(desired, live any, fp fieldpath.Path) (pointer, bool) {
	var out pointer
	for _, pe := range fp {
		if pe.FieldName != nil {
			out = append(out, *pe.FieldName)
			desired, _ = step(desired, *pe.FieldName)
			live, _ = step(live, *pe.FieldName)
			continue
		}
		var match func(item any) bool
		switch {
		case pe.Key != nil:
			match = func(item any) bool {
				m, _ := item.(map[string]any)
				return m != nil && keyMatches(m, *pe.Key)
			}
		case pe.Value != nil:
			match = func(item any) bool {
				return item != nil && value.Equals(value.NewValueInterface(item), *pe.Value)
			}
		}
		// The first item that pe names: an index names the item at its
		// position, whatever the item.
		firstOf := func(list []any) (int, bool) {
			if match == nil {
				if pe.Index != nil && *pe.Index >= 0 && *pe.Index < len(list) {
					return *pe.Index, true
				}
				return -1, true
			}
			i, _, ok := l.items(list, pe, match)
			return i, ok
		}
		dl, _ := desired.([]any)
		ll, _ := live.([]any)
		at, ok := firstOf(dl)
		if !ok {
			return nil, false
		}
		if at >= 0 {
			desired = dl[at]
		}
		j, ok := firstOf(ll)
		if !ok {
			return nil, false
		}
		if j >= 0 {
			if at < 0 {
				at, desired = j, nil
			}
			live = ll[j]
		}
		if at < 0 {
			return nil, false
		}
		out = append(out, strconv.Itoa(at))
	}
	return out, true
}

// remember records a correction in the resource's history, newest first.
func (st *resourceState) remember(r v1alpha1.DriftRecord) {
	st.history = slices.Insert(st.history, 0, r)
	if len(st.history) > historySize {
		st.history = st.history[:historySize]
	}
}

// load takes what the engine remembers of drift from the resource's status
// the first time the engine sees it (after a restart): later passes trust
// their own memory over a cache that may not show the last status write.
func (st *resourceState) load(vr *v1alpha1.VidraResource) {
	if st.loaded {
		return
	}
	st.loaded = true
	st.history = slices.Clone(vr.Status.DriftHistory)
	for _, r := range vr.Status.Drift {
		if st.reported == nil {
			st.reported = map[ObjectKey]v1alpha1.DriftRecord{}
		}
		st.reported[recordKey(r)] = r
	}
}

func recordKey(r v1alpha1.DriftRecord) ObjectKey {
	return inventoryKey(v1alpha1.ManagedResource{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
}

// report lists an object's drift (driftPolicy Report). It returns whether
// the record is new or changed: a new drift to announce. An unchanged
// drift keeps the time it was first seen.
func (st *resourceState) report(key ObjectKey, r v1alpha1.DriftRecord) bool {
	if st.reported == nil {
		st.reported = map[ObjectKey]v1alpha1.DriftRecord{}
	}
	prev, ok := st.reported[key]
	if ok && prev.Deleted == r.Deleted && prev.Manager == r.Manager && slices.Equal(prev.Fields, r.Fields) {
		return false
	}
	st.reported[key] = r
	return true
}

// driftList returns the reported drift of the objects in keep, sorted by
// object, and forgets the rest.
func (st *resourceState) driftList(keep func(ObjectKey) bool) []v1alpha1.DriftRecord {
	var out []v1alpha1.DriftRecord
	for k, r := range st.reported {
		if !keep(k) {
			delete(st.reported, k)
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b v1alpha1.DriftRecord) int {
		// The API version last: objects of one kind and name in two
		// groups would otherwise come in the map's order, a status
		// changed at every reconcile.
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name),
			cmp.Compare(a.APIVersion, b.APIVersion))
	})
	return out
}

// labelSet bounds the distinct values of a metric's label: the first max
// values seen keep theirs, later ones, and values over maxLabelBytes, are
// counted as "other".
type labelSet struct {
	max  int
	mu   sync.Mutex
	seen map[string]bool
}

func (m *labelSet) label(v string) string {
	if v == "" {
		return "unknown"
	}
	if len(v) > maxLabelBytes {
		return "other"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen[v] {
		return v
	}
	if len(m.seen) >= m.max {
		return "other"
	}
	if m.seen == nil {
		m.seen = map[string]bool{}
	}
	m.seen[v] = true
	return v
}
