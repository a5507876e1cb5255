// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package standin

import (
	"crypto/md5"
	"fmt"
	"slices"
	"strings"
)

// execute answers doc over the artifacts of one branch (sorted by id), as
// Infrahub's GraphQL does: the data, or errors (data is then nil).
func (s *Server) execute(doc *document, vars map[string]any, arts []*Stored) (map[string]any, []gqlError) {
	ex := &executor{s: s, doc: doc, vars: vars}
	data := map[string]any{}
	for _, f := range doc.sel {
		switch f.name {
		case "CoreArtifact":
			data[f.key()] = ex.coreArtifact(f, arts)
		case "__typename":
			data[f.key()] = "Query"
		default:
			ex.fail(f, "Cannot query field %q on type \"Query\".", f.name)
		}
	}
	if len(ex.errs) > 0 {
		return nil, ex.errs
	}
	return data, nil
}

type executor struct {
	s    *Server
	doc  *document
	vars map[string]any
	errs []gqlError
}

func (ex *executor) fail(f *field, format string, a ...any) {
	ex.errs = append(ex.errs, gqlError{Message: fmt.Sprintf(format, a...), Locations: []location{{f.line, f.col}}})
}

// resolve returns an argument's value, its variables replaced.
func (ex *executor) resolve(v value) any {
	if v.variable != "" {
		return ex.vars[v.variable]
	}
	if list, ok := v.lit.([]value); ok {
		out := make([]any, len(list))
		for i, e := range list {
			out[i] = ex.resolve(e)
		}
		return out
	}
	return v.lit
}

// strings reads a list-of-strings argument; a single string is coerced to
// a list of one, as GraphQL does.
func (ex *executor) strings(f *field, name string, v any) ([]string, bool) {
	switch t := v.(type) {
	case nil:
		return nil, true
	case string:
		return []string{t}, true
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			s, ok := e.(string)
			if !ok {
				ex.fail(f, "Argument %q has an invalid value: String cannot represent a non string value.", name)
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	ex.fail(f, "Argument %q has an invalid value: String cannot represent a non string value.", name)
	return nil, false
}

// integer reads an Int argument (JSON numbers come as float64).
func (ex *executor) integer(f *field, name string, v any) (int, bool) {
	switch t := v.(type) {
	case nil:
		return 0, true
	case int64:
		return int(t), true
	case float64:
		if t == float64(int(t)) && t >= 0 {
			return int(t), true
		}
	}
	ex.fail(f, "Argument %q has an invalid value: Int cannot represent a non-integer value.", name)
	return 0, false
}

// coreArtifact answers CoreArtifact(filters) { count edges { node } }.
func (ex *executor) coreArtifact(f *field, arts []*Stored) any {
	var offset, limit int
	keep := func(*Stored) bool { return true }
	for _, a := range f.args {
		v := ex.resolve(a.val)
		var match func(*Stored) string
		switch strings.TrimSuffix(strings.TrimSuffix(a.name, "__values"), "__value") {
		case "name":
			match = func(st *Stored) string { return st.Name }
		case "definition__name":
			match = func(st *Stored) string { return st.Definition }
		case "status":
			match = func(st *Stored) string { return st.Status }
		case "content_type":
			match = func(st *Stored) string { return st.ContentType }
		}
		switch {
		case a.name == "offset":
			offset, _ = ex.integer(f, a.name, v)
		case a.name == "limit":
			limit, _ = ex.integer(f, a.name, v)
		case a.name == "ids" || a.name == "object__ids":
			want, ok := ex.strings(f, a.name, v)
			if !ok || v == nil {
				continue
			}
			prev, byTarget := keep, a.name == "object__ids"
			keep = func(st *Stored) bool {
				key := st.ID
				if byTarget {
					key = st.Target
				}
				return prev(st) && slices.Contains(want, key)
			}
		case match != nil && strings.HasSuffix(a.name, "__values"):
			want, ok := ex.strings(f, a.name, v)
			if !ok || v == nil {
				continue
			}
			prev := keep
			keep = func(st *Stored) bool { return prev(st) && slices.Contains(want, match(st)) }
		case match != nil && strings.HasSuffix(a.name, "__value"):
			if v == nil {
				continue
			}
			want, ok := v.(string)
			if !ok {
				ex.fail(f, "Argument %q has an invalid value: String cannot represent a non string value.", a.name)
				continue
			}
			prev := keep
			keep = func(st *Stored) bool { return prev(st) && match(st) == want }
		default:
			ex.fail(f, "Unknown argument %q on field \"CoreArtifact\" of type \"Query\".", a.name)
		}
	}
	var matched []*Stored
	for _, st := range arts {
		if keep(st) {
			matched = append(matched, st)
		}
	}
	pageOf := matched[min(offset, len(matched)):]
	if maxPage := ex.s.opts.MaxPageSize; maxPage > 0 && (limit == 0 || limit > maxPage) {
		limit = maxPage
	}
	if limit > 0 && limit < len(pageOf) {
		pageOf = pageOf[:limit]
	}
	out := map[string]any{}
	for _, sf := range f.sel {
		switch sf.name {
		case "count":
			out[sf.key()] = len(matched)
		case "__typename":
			out[sf.key()] = "PaginatedCoreArtifact"
		case "edges":
			edges := make([]any, 0, len(pageOf))
			for _, st := range pageOf {
				edge := map[string]any{}
				for _, ef := range sf.sel {
					switch ef.name {
					case "node":
						edge[ef.key()] = ex.node(ef, st)
					case "__typename":
						edge[ef.key()] = "EdgedCoreArtifact"
					default:
						ex.fail(ef, "Cannot query field %q on type \"EdgedCoreArtifact\".", ef.name)
					}
				}
				edges = append(edges, edge)
			}
			if len(pageOf) == 0 {
				// Still check the selection.
				ex.node(&field{sel: nodeSel(sf)}, &Stored{})
			}
			out[sf.key()] = edges
		default:
			ex.fail(sf, "Cannot query field %q on type \"PaginatedCoreArtifact\".", sf.name)
		}
	}
	return out
}

// nodeSel returns the selection of edges' node, for checking it on an
// empty page.
func nodeSel(edges *field) []*field {
	for _, f := range edges.sel {
		if f.name == "node" {
			return f.sel
		}
	}
	return nil
}

// node answers a CoreArtifact node's selection.
func (ex *executor) node(f *field, st *Stored) map[string]any {
	out := map[string]any{}
	for _, nf := range f.sel {
		switch nf.name {
		case "id":
			out[nf.key()] = st.ID
		case "__typename":
			out[nf.key()] = "CoreArtifact"
		case "display_label":
			out[nf.key()] = st.Name
		case "hfid":
			out[nf.key()] = nil
		case "name", "status", "content_type", "checksum", "storage_id", "parameters":
			out[nf.key()] = ex.attribute(nf, st)
		case "object":
			out[nf.key()] = ex.relation(nf, st.Target, "CoreArtifactTarget", nil)
		case "definition":
			out[nf.key()] = ex.relation(nf, st.DefinitionID, "CoreArtifactDefinition", st)
		default:
			ex.fail(nf, "Cannot query field %q on type \"CoreArtifact\".", nf.name)
		}
	}
	return out
}

// attribute answers an attribute's selection: value, and the attribute's
// own id (which storage_id { id } selects, the earlier operator's query).
func (ex *executor) attribute(f *field, st *Stored) map[string]any {
	var v any
	switch f.name {
	case "name":
		v = st.Name
	case "status":
		v = st.Status
	case "content_type":
		v = st.ContentType
	case "checksum":
		v = st.Checksum
	case "storage_id":
		v = st.StorageID
	case "parameters":
		v = nil
	}
	if f.sel == nil {
		ex.fail(f, "Field %q of type \"TextAttribute\" must have a selection of subfields.", f.name)
	}
	out := map[string]any{}
	for _, af := range f.sel {
		switch af.name {
		case "value":
			out[af.key()] = v
		case "id":
			out[af.key()] = attributeID(st.ID, f.name)
		case "__typename":
			out[af.key()] = "TextAttribute"
		case "is_default", "is_protected":
			out[af.key()] = false
		default:
			ex.fail(af, "Cannot query field %q on type \"TextAttribute\".", af.name)
		}
	}
	return out
}

// relation answers a one-cardinality relation: { node { id ... } }.
func (ex *executor) relation(f *field, id, typ string, st *Stored) map[string]any {
	out := map[string]any{}
	for _, rf := range f.sel {
		switch rf.name {
		case "__typename":
			out[rf.key()] = "NestedEdged" + typ
		case "node":
			node := map[string]any{}
			for _, nf := range rf.sel {
				switch {
				case nf.name == "id":
					node[nf.key()] = id
				case nf.name == "__typename":
					node[nf.key()] = typ
				case nf.name == "display_label":
					node[nf.key()] = id
				case st != nil && (nf.name == "name" || nf.name == "artifact_name"):
					value := st.Definition
					if nf.name == "artifact_name" {
						value = st.Name
					}
					attr := map[string]any{}
					for _, af := range nf.sel {
						if af.name == "value" {
							attr[af.key()] = value
						}
					}
					node[nf.key()] = attr
				default:
					ex.fail(nf, "Cannot query field %q on type %q.", nf.name, typ)
				}
			}
			out[rf.key()] = node
		default:
			ex.fail(rf, "Cannot query field %q on type %q.", rf.name, "NestedEdged"+typ)
		}
	}
	return out
}

// attributeID is the stable id of an artifact's attribute.
func attributeID(artifactID, attr string) string {
	sum := md5.Sum([]byte(artifactID + "/" + attr))
	return formatUUID(sum[:])
}

// formatUUID writes 16 bytes as a UUID, Infrahub's form of ids.
func formatUUID(b []byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
