// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package apply

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/vidra-operator/vidra/internal/health"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// result is how one object's action ended, for settle to record.
type result struct {
	// live is the object as the pass read it before it acted: nil when the
	// pass created it, or (reported) when it is reported deleted.
	live *unstructured.Unstructured
	// rv and generation are what the object is at now: the write's answer,
	// or live's version and 0 when nothing was written.
	rv         string
	generation int64
	// hash is the manifest object's, which the record keeps.
	hash uint64
	// reported: drift was reported (driftPolicy Report), not corrected;
	// drift is what is listed, nil when nothing is.
	reported bool
	drift    *v1alpha1.DriftRecord
}

// settle records how p's action ended: the object's health as the pass
// leaves it and, unless drift was only reported, the version Vidra's record
// now holds and, when the pass wrote, whether as a creation, a change, or a
// correction of drift. The write itself was declared to the registry when
// it was sent.
func (e *Engine) settle(pass *Pass, p *planned, r result) {
	p.applied = true
	if r.reported {
		e.settleReported(pass, p, r)
		return
	}
	p.observe(r.live, r.generation)
	pass.st.applied[p.key] = appliedRecord{hash: r.hash, rv: r.rv}
	delete(pass.st.reported, p.key)
	if r.live != nil && r.rv == r.live.GetResourceVersion() {
		return
	}
	e.countWrite(pass, p, r.live)
}

// settleReported lists the drift r reports, or clears an earlier report
// when there is none; the record of Vidra's last apply stays as it was, so
// that the drift is still drift at the next pass.
func (e *Engine) settleReported(pass *Pass, p *planned, r result) {
	if r.drift != nil {
		e.reportDrift(pass, p, *r.drift)
	} else {
		delete(pass.st.reported, p.key)
	}
	if r.live == nil {
		p.health, p.healthMessage = health.Of(nil)
		return
	}
	p.observe(r.live, 0)
}

// countWrite counts a write of p over live (nil: a creation) in the pass's
// outcome, and as drift corrected when the manifest did not change.
func (e *Engine) countWrite(pass *Pass, p *planned, live *unstructured.Unstructured) {
	p.wrote = true
	pass.Out.Changed++
	if p.adoptedFrom != "" {
		e.events.Event(pass.VR, false, v1alpha1.ReasonAdopted, "Adopted %s, left by %s, which no longer exists (spec.adoptOrphans)", p.key, p.adoptedFrom)
	}
	switch {
	case live == nil:
		pass.Out.Created++
	default:
		pass.Out.Configured++
	}
	// Drift: an object Vidra already manages, changed while the manifest
	// did not (p.unchanged), had to be written again.
	if !p.unchanged || p.marks {
		return
	}
	if live == nil {
		pass.Out.DriftDeleted++
	} else {
		pass.Out.DriftEdited++
	}
	d := p.drift
	if d == nil {
		r := driftOf(p, live, handEdits{fields: &fieldpath.Set{}}, e.clock.Now())
		d = &r
	}
	pass.Out.Drifted = append(pass.Out.Drifted, DescribeDrift(*d))
	kind := e.kinds.label(p.key.kind)
	e.metrics.DriftCorrections.WithLabelValues(kind).Inc()
	e.metrics.DriftDetected.WithLabelValues(kind, e.managers.label(d.Manager)).Inc()
	pass.st.remember(*d)
	if live != nil {
		pass.st.corrected(p.key, lastWriter(live), d.Fields, e.clock.Now())
	}
}

// reportDrift lists p's drift under driftPolicy Report, and counts and
// announces it when it is new.
func (e *Engine) reportDrift(pass *Pass, p *planned, d v1alpha1.DriftRecord) {
	if pass.st.report(p.key, d) {
		pass.Out.NewDrift = append(pass.Out.NewDrift, DescribeDrift(d))
		e.metrics.DriftDetected.WithLabelValues(e.kinds.label(p.key.kind), e.managers.label(d.Manager)).Inc()
	}
}

// DescribeDrift says in a few words what changed and who changed it.
func DescribeDrift(d v1alpha1.DriftRecord) string {
	// The group, but for the core one's: one kind and name may be
	// served by two groups (Gateway).
	key := recordKey(d)
	if key.group != "" {
		key.kind += "." + key.group
	}
	switch {
	case d.Deleted:
		return key.String() + " (deleted)"
	case len(d.Fields) == 0 && d.Manager != "":
		// Values as the manifest says, fields held by a hand edit.
		return key.String() + " (fields taken back from " + d.Manager + ")"
	case len(d.Fields) == 0:
		return key.String() + " (edited)"
	}
	s := key.String() + " (" + strings.Join(d.Fields, ", ")
	if d.Manager != "" {
		s += " by " + d.Manager
	}
	return s + ")"
}
