// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vidra-operator/vidra/internal/wording"
)

// A remote server's Status may say up to maxErrorBody, and each of a
// reconcile's requests may fail with one: a thousand objects refused with
// 64 KiB each made a reconcile hold 64 MiB of the tenant's text, a log line
// as long, and Events of it. Its message is kept to maxStatusMessage, and
// at most maxStatusCauses of its causes, each cut to maxCauseMessage: what
// a person reads of a refusal is its start.
const (
	maxStatusMessage = 1024
	maxStatusCauses  = 8
	maxCauseMessage  = 256
)

// boundStatus returns the Status in body with its text bounded (see
// maxStatusMessage); body itself when it is within the bounds, or when it
// does not decode, which client-go's decoder then reports.
func boundStatus(body []byte) []byte {
	if len(body) <= maxStatusMessage {
		return body
	}
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return body
	}
	st.Message = wording.Cut(st.Message, maxStatusMessage, "...")
	if d := st.Details; d != nil {
		d.Name = wording.Cut(d.Name, maxCauseMessage, "...")
		d.Kind = wording.Cut(d.Kind, maxCauseMessage, "...")
		d.Group = wording.Cut(d.Group, maxCauseMessage, "...")
		d.UID = types.UID(wording.Cut(string(d.UID), maxCauseMessage, "..."))
		d.Causes = d.Causes[:min(len(d.Causes), maxStatusCauses)]
		for i := range d.Causes {
			d.Causes[i].Message = wording.Cut(d.Causes[i].Message, maxCauseMessage, "...")
			d.Causes[i].Field = wording.Cut(d.Causes[i].Field, maxCauseMessage, "...")
			d.Causes[i].Type = metav1.CauseType(wording.Cut(string(d.Causes[i].Type), maxCauseMessage, "..."))
		}
	}
	st.Reason = metav1.StatusReason(wording.Cut(string(st.Reason), maxCauseMessage, "..."))
	st.Continue, st.SelfLink, st.ResourceVersion = "", "", ""
	out, err := json.Marshal(&st)
	if err != nil {
		return body
	}
	return out
}
