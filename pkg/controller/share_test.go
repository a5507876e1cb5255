package controller

import (
	"slices"
	"testing"
)

// A replica that only gains buckets keeps its selectors and adds one for
// the buckets gained, so that it lists only their objects; a loss, a fence
// or too many selectors take it back to one selector for the whole share.
func TestShareSelectorsWidenOnGainsOnly(t *testing.T) {
	c := &Controller{}
	steps := []struct {
		name    string
		buckets []int
		want    []string
	}{
		{"first share", []int{3, 1, 2}, []string{objectSelector([]int{1, 2, 3})}},
		{"same share", []int{1, 2, 3}, []string{objectSelector([]int{1, 2, 3})}},
		{"a replica died", []int{1, 2, 3, 7, 5}, []string{objectSelector([]int{1, 2, 3}), objectSelector([]int{5, 7})}},
		{"another died", []int{1, 2, 3, 5, 7, 9}, []string{objectSelector([]int{1, 2, 3}), objectSelector([]int{5, 7}), objectSelector([]int{9})}},
		{"a replica joined", []int{1, 3, 5, 9}, []string{objectSelector([]int{1, 3, 5, 9})}},
		{"no bucket", []int{}, []string{objectSelector([]int{})}},
		{"from none", []int{4}, []string{objectSelector([]int{4})}},
		{"gain", []int{4, 6}, []string{objectSelector([]int{4}), objectSelector([]int{6})}},
		{"gain", []int{4, 6, 8}, []string{objectSelector([]int{4}), objectSelector([]int{6}), objectSelector([]int{8})}},
		{"gain", []int{4, 6, 8, 10}, []string{objectSelector([]int{4}), objectSelector([]int{6}), objectSelector([]int{8}), objectSelector([]int{10})}},
		{"past the cap", []int{4, 6, 8, 10, 12}, []string{objectSelector([]int{4, 6, 8, 10, 12})}},
		{"fenced", nil, []string{objectSelector(nil)}},
		{"after the fence", []int{1}, []string{objectSelector([]int{1})}},
	}
	for _, s := range steps {
		if got := c.shareSelectors(s.buckets); !slices.Equal(got, s.want) {
			t.Fatalf("%s %v: selectors %q, want %q", s.name, s.buckets, got, s.want)
		}
	}
	if got := objectSelector([]int{}); got == objectSelector(nil) {
		t.Fatalf("no bucket selects every object: %q", got)
	}
}

// What a replica prepares when a member is late renewing is the selector it
// adds once that member's buckets are its: the lists are then done.
func TestPreparedSelectorIsTheOneAGainAdds(t *testing.T) {
	c := &Controller{}
	if got := c.preparedSelectors([]int{5}); got != nil {
		t.Fatalf("prepared %q with no share yet; the first share is listed whole", got)
	}
	c.shareSelectors([]int{1, 2, 3})
	prepared := c.preparedSelectors([]int{7, 5})
	added := c.shareSelectors([]int{1, 2, 3, 5, 7})
	if len(prepared) != 1 || added[len(added)-1] != prepared[0] {
		t.Fatalf("prepared %q, but the gain added %q", prepared, added)
	}
	if got := c.preparedSelectors(nil); got != nil {
		t.Fatalf("prepared %q for no bucket", got)
	}
	c.shareSelectors([]int{1, 2, 3, 5, 7, 9})
	c.shareSelectors([]int{1, 2, 3, 5, 7, 9, 11})
	if got := c.preparedSelectors([]int{13}); got != nil {
		t.Fatalf("prepared %q at the cap of selectors, where a gain lists the whole share", got)
	}
}
