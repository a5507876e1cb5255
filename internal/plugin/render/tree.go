// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package render

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/vidra-operator/vidra/internal/manifest"
	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// Tree is a VidraResource and each object it manages, as kubectl vidra
// tree shows them.
type Tree struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	Ready       string `json:"ready"`
	Reason      string `json:"reason,omitempty"`
	Healthy     string `json:"healthy,omitempty"`
	Suspended   bool   `json:"suspended,omitempty"`
	DriftPolicy string `json:"driftPolicy"`
	// Conflict is the message of the Conflict condition, when True.
	Conflict string `json:"conflict,omitempty"`
	// Sources are the ConfigMaps and Secrets of spec.manifestFrom, first
	// in the tree as the manifest's are read first.
	Sources []TreeSource `json:"sources,omitempty"`
	Objects []TreeObject `json:"objects"`
}

// TreeSource is one reference of spec.manifestFrom.
type TreeSource struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
	// SHA256 is the sum of its content the last successful reconcile
	// applied, empty when none did yet.
	SHA256 string `json:"sha256,omitempty"`
}

// TreeObject is one managed object of a Tree.
type TreeObject struct {
	APIVersion    string `json:"apiVersion"`
	Kind          string `json:"kind"`
	Namespace     string `json:"namespace,omitempty"`
	Name          string `json:"name"`
	Health        string `json:"health,omitempty"`
	HealthMessage string `json:"healthMessage,omitempty"`
	// Drift is, with driftPolicy Report, how the object differs now;
	// otherwise the last correction of it that the history holds.
	Drift *v1alpha1.DriftRecord `json:"drift,omitempty"`
	// Drifted tells that Drift is a difference that stays (Report), not
	// one corrected.
	Drifted bool `json:"drifted,omitempty"`
	// Conflict is what the Conflict condition says of this object.
	Conflict string `json:"conflict,omitempty"`
}

// Ref names the object as the operator's messages do: Kind ns/name.
func (o TreeObject) Ref() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// documentPrefix is what follows the object's name in the operator's
// error for it: its document, if it is in one, which the tree, naming the
// object, does not repeat.
var documentPrefix = regexp.MustCompile(`^(?: \(document -?\d+\))?: `)

// NewTree gathers the tree of vr from its status alone: the inventory and
// its health, the drift records and the conditions.
func NewTree(vr *v1alpha1.VidraResource) *Tree {
	ready, _ := condition(vr, v1alpha1.ConditionReady)
	t := &Tree{Namespace: vr.Namespace, Name: vr.Name, Ready: ready, Suspended: vr.Spec.Suspend, DriftPolicy: string(vr.Spec.DriftPolicy)}
	if t.DriftPolicy == "" {
		t.DriftPolicy = string(v1alpha1.DriftPolicyCorrect)
	}
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		t.Reason = c.Reason
	}
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionHealthy); c != nil {
		t.Healthy = c.Reason
	}
	var conflicts []string
	if c := meta.FindStatusCondition(vr.Status.Conditions, v1alpha1.ConditionConflict); c != nil && c.Status == "True" {
		t.Conflict = c.Message
		conflicts = strings.Split(c.Message, "; ")
	}
	for _, src := range vr.Spec.ManifestFrom {
		ts := TreeSource{Kind: "ConfigMap"}
		ref := src.ConfigMapRef
		if src.SecretRef != nil {
			ts.Kind, ref = "Secret", src.SecretRef
		}
		if ref == nil {
			continue
		}
		ts.Name, ts.Key = ref.Name, ref.Key
		for _, a := range vr.Status.ManifestFrom {
			if a.Kind == ts.Kind && a.Name == ts.Name && a.Key == ts.Key {
				ts.SHA256 = a.SHA256
			}
		}
		t.Sources = append(t.Sources, ts)
	}
	for _, m := range vr.Status.ManagedResources {
		o := TreeObject{APIVersion: m.APIVersion, Kind: m.Kind, Namespace: m.Namespace, Name: m.Name, Health: m.Health, HealthMessage: m.HealthMessage}
		if d := findDrift(vr.Status.Drift, m); d != nil {
			o.Drift, o.Drifted = d, true
		} else if d := findDrift(vr.Status.DriftHistory, m); d != nil {
			o.Drift = d
		}
		var mine []string
		for _, c := range conflicts {
			if rest, ok := strings.CutPrefix(c, o.Ref()); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, ": ")) {
				mine = append(mine, strings.TrimPrefix(documentPrefix.ReplaceAllString(rest, ""), " "))
			}
		}
		o.Conflict = strings.Join(mine, "; ")
		t.Objects = append(t.Objects, o)
	}
	return t
}

// findDrift returns the first record of records for m: the newest, as
// the history is kept newest first.
func findDrift(records []v1alpha1.DriftRecord, m v1alpha1.ManagedResource) *v1alpha1.DriftRecord {
	// An object is one whatever version of its group names it, and an
	// Event one in both its groups, as the operator keys them.
	group := func(apiVersion, kind string) string {
		gv, _ := schema.ParseGroupVersion(apiVersion)
		return manifest.StoredGroup(gv.Group, kind)
	}
	for i := range records {
		r := &records[i]
		if r.Kind == m.Kind && r.Namespace == m.Namespace && r.Name == m.Name && group(r.APIVersion, r.Kind) == group(m.APIVersion, m.Kind) {
			return r
		}
	}
	return nil
}

// WriteTree writes t as kubectl tree writes an owner and its objects:
//
//	NAMESPACE      NAME                         READY   HEALTH       DRIFT                                         MESSAGE
//	vidra-system   VidraResource/sample-app     True    AllCurrent
//	demo           ├─ConfigMap/web-config               Current      corrected 2m ago: /data/x by kubectl-edit
//	demo           └─Deployment/web                     InProgress                                                 Deployment is not available
func WriteTree(w io.Writer, t *Tree, o Options) error {
	var buf bytes.Buffer
	tw := printers.GetNewTabWriter(&buf)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tREADY\tHEALTH\tDRIFT\tMESSAGE")
	rootMsg := OneLine(t.Reason)
	switch {
	case t.Suspended:
		rootMsg = "suspended"
	case t.Conflict != "" && len(t.Objects) == 0:
		rootMsg = "conflict: " + OneLine(t.Conflict)
	}
	healthy := t.Healthy
	if healthy == "" {
		healthy = none
	}
	// Every value is the resource's status, or a name of an object of a
	// destination: Safe keeps them off the terminal, and on their row.
	row(tw, Safe(t.Namespace), "VidraResource/"+Safe(t.Name), o.paint(statusColor(t.Ready), Safe(t.Ready)),
		o.paint(statusColor(healthy), Safe(healthy)), rootDrift(t), rootMsg)
	for i, src := range t.Sources {
		branch := "├─"
		if i == len(t.Sources)-1 && len(t.Objects) == 0 {
			branch = "└─"
		}
		msg := "manifest source"
		if src.Key != "" {
			msg += ", key " + Safe(src.Key)
		}
		if sum, ok := strings.CutPrefix(src.SHA256, "sha256:"); ok && len(sum) >= 12 {
			msg += ", applied sha256:" + Safe(sum[:12])
		} else {
			msg += ", not applied yet"
		}
		row(tw, Safe(t.Namespace), branch+Safe(src.Kind)+"/"+Safe(src.Name), "", "", "", msg)
	}
	for i, obj := range t.Objects {
		branch := "├─"
		if i == len(t.Objects)-1 {
			branch = "└─"
		}
		ns := obj.Namespace
		if ns == "" {
			ns = "-"
		}
		health := obj.Health
		if health == "" {
			health = "Unknown"
		}
		var msg []string
		if obj.Conflict != "" {
			msg = append(msg, "conflict: "+OneLine(obj.Conflict))
		}
		if obj.HealthMessage != "" && obj.Health != "Current" {
			msg = append(msg, OneLine(obj.HealthMessage))
		}
		row(tw, Safe(ns), branch+Safe(obj.Kind)+"/"+Safe(obj.Name), "", o.paint(statusColor(health), Safe(health)),
			drift(obj, o.Now), strings.Join(msg, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeTrimmed(w, buf.String())
}

// writeTrimmed writes s without the blanks the tab writer pads empty last
// cells with.
func writeTrimmed(w io.Writer, s string) error {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if strings.HasSuffix(l, "\n") {
			lines[i] = strings.TrimRight(l[:len(l)-1], " ") + "\n"
		}
	}
	_, err := io.WriteString(w, strings.Join(lines, ""))
	return err
}

// row writes one row of cells. Empty trailing cells stay: a shorter row
// would end the tab writer's column blocks and misalign the rows below.
func row(w io.Writer, cells ...string) {
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// rootDrift counts the drift of the whole resource.
func rootDrift(t *Tree) string {
	n := 0
	for _, o := range t.Objects {
		if o.Drift != nil && o.Drifted {
			n++
		}
	}
	if t.DriftPolicy == string(v1alpha1.DriftPolicyReport) {
		return fmt.Sprintf("%d drifted (Report)", n)
	}
	return ""
}

// drift says what happened to the object last: "corrected 2m ago:
// /data/greeting by kubectl-edit", or with driftPolicy Report "drifted 2m
// ago: ..." for a difference that stays.
func drift(o TreeObject, now time.Time) string {
	d := o.Drift
	if d == nil {
		return ""
	}
	verb := "corrected"
	if o.Drifted {
		verb = "drifted"
	}
	what := strings.Join(d.Fields, ",")
	if d.Deleted {
		what = "deleted"
	}
	s := fmt.Sprintf("%s %s ago: %s", verb, Age(d.Time.Time, now), what)
	if d.Manager != "" {
		s += " by " + d.Manager
	}
	// A field manager's name is anyone's choice: keep it off the terminal.
	return OneLine(s)
}
