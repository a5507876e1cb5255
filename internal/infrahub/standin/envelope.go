// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

import (
	"encoding/json"
	"net/http"
)

// writeError writes Infrahub's REST error envelope:
// {"data": null, "errors": [{"message", "extensions": {"code"}}]}.
func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, map[string]any{
		"data":   nil,
		"errors": []any{map[string]any{"message": message, "extensions": map[string]any{"code": status}}},
	})
}

// writeJSON writes v as a JSON answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeValidation writes FastAPI's 422 answer for a body that fails
// validation (not Infrahub's envelope).
func writeValidation(w http.ResponseWriter, loc []string, msg string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"detail": []any{map[string]any{"type": "value_error", "loc": append([]string{"body"}, loc...), "msg": msg}},
	})
}
