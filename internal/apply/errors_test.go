package apply

import (
	"errors"
	"testing"
)

// TestObjectErrorNamesItsDocumentFromOne: messages number documents as an
// editor does, and an object in no document (one pruned) is named alone.
func TestObjectErrorNamesItsDocumentFromOne(t *testing.T) {
	tests := []struct {
		err  *ObjectError
		want string
	}{
		{&ObjectError{Key: ObjectKey{kind: "ConfigMap", namespace: "demo", name: "web"}, Index: 0, Err: errors.New("bad")}, "ConfigMap demo/web (document 1): bad"},
		{&ObjectError{Key: ObjectKey{kind: "ConfigMap", namespace: "demo", name: "web"}, Index: 4, Err: errors.New("bad")}, "ConfigMap demo/web (document 5): bad"},
		{&ObjectError{Key: ObjectKey{kind: "Namespace", name: "old"}, Index: -1, Err: errors.New("left the manifest")}, "Namespace old: left the manifest"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
