// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vidra-operator/vidra/internal/destination/guard/hostiletest"
)

// A remote server's refusal is kept, as a Status, but not all of it: a
// thousand objects refused with 64 KiB each would make one reconcile hold
// 64 MiB of the tenant's text. The message keeps its start, and a few of
// its causes.
func TestRemoteStatusTextIsBounded(t *testing.T) {
	srv := hostiletest.Server(t, func(w http.ResponseWriter, r *http.Request) {
		st := metav1.Status{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
			Reason: metav1.StatusReasonInvalid, Message: "refused: " + strings.Repeat("é", 25500),
			Details: &metav1.StatusDetails{Name: "x", Kind: "configmaps"},
		}
		for i := range 100 {
			st.Details.Causes = append(st.Details.Causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: fmt.Sprintf("data.k%d", i), Message: strings.Repeat("y", 50)})
		}
		body, _ := json.Marshal(&st)
		if len(body) < 60<<10 || len(body) > maxErrorBody {
			t.Errorf("the test's Status takes %d bytes, want 60 KiB to 64 KiB", len(body))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(st.Code))
		w.Write(body)
	})
	c := clientsIn(t, srv, newTest(t, Config{}), "tenant")
	_, err := c.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("t").Get(t.Context(), "x", metav1.GetOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("err = %v, want the server's Invalid", err)
	}
	if n := len(err.Error()); n > 2*maxStatusMessage {
		t.Errorf("the refusal reads %d bytes, want at most %d", n, 2*maxStatusMessage)
	}
	if !strings.HasPrefix(err.Error(), "refused: é") || !utf8.ValidString(err.Error()) {
		t.Errorf("the refusal does not keep its start whole: %.40q", err.Error())
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("err %T is not an API status", err)
	}
	if d := status.Status().Details; d == nil || len(d.Causes) != maxStatusCauses {
		t.Errorf("the refusal keeps %+v, want its first %d causes", d, maxStatusCauses)
	}
}
