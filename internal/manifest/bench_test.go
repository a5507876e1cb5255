package manifest

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParse measures Parse on manifests near the size the API server
// allows a VidraResource (about 1.5 MiB).
func BenchmarkParse(b *testing.B) {
	var yamlDocs, jsonList strings.Builder
	jsonList.WriteString(`{"apiVersion": "v1", "kind": "List", "items": [`)
	for i := 0; yamlDocs.Len() < 1<<20; i++ {
		fmt.Fprintf(&yamlDocs, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\n  labels: {app: web}\ndata:\n  key: value\n---\n", i)
		if i > 0 {
			jsonList.WriteString(",\n")
		}
		fmt.Fprintf(&jsonList, `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c%d", "labels": {"app": "web"}}, "data": {"key": "value"}}`, i)
	}
	jsonList.WriteString("]}")

	for _, bm := range []struct {
		name     string
		manifest string
	}{
		{"yaml documents", yamlDocs.String()},
		{"json list", jsonList.String()},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(int64(len(bm.manifest)))
			for b.Loop() {
				if _, errs := Parse(bm.manifest); len(errs) > 0 {
					b.Fatal(errs)
				}
			}
		})
	}
}
