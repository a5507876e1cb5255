// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"container/list"
	"time"

	"k8s.io/client-go/tools/cache"
)

// maxAccessChecks bounds the successful checks of access to kubeconfig
// Secrets that are remembered, for the whole operator: a tenant names any
// ServiceAccount it likes, as many times as it likes, and a Secret readable
// by every ServiceAccount of its namespace lets each name pass. As many as
// the clients of ServiceAccounts kept for the operator's own cluster
// (maxImpersonated), with which the checks are made. One forgotten is
// checked again when next needed.
const maxAccessChecks = 1024

// accessCache holds the successful checks of access, at most size, the ones
// used last; a check older than accessRecheck is never used, and is dropped
// when it is the least recently used. It is not safe for concurrent use:
// remotes guards it with its mu.
type accessCache struct {
	size  int
	order *list.List // of *accessEntry, the one used last first
	index map[accessKey]*list.Element
}

type accessEntry struct {
	key   accessKey
	check accessCheck
}

func newAccessCache(size int) *accessCache {
	return &accessCache{size: size, order: list.New(), index: map[accessKey]*list.Element{}}
}

// allowed reports whether ak was checked for the Secret's resourceVersion
// rv less than accessRecheck before now, and if so marks it used.
func (c *accessCache) allowed(ak accessKey, rv string, now time.Time) bool {
	el, ok := c.index[ak]
	if !ok {
		return false
	}
	ch := el.Value.(*accessEntry).check
	if ch.rv != rv || now.Sub(ch.at) >= accessRecheck {
		return false
	}
	c.order.MoveToFront(el)
	return true
}

// add remembers a successful check of ak made at check.at. It drops the
// least recently used checks that are too old to be used, then as many
// others as needed to keep at most size.
func (c *accessCache) add(ak accessKey, check accessCheck, now time.Time) {
	if el, ok := c.index[ak]; ok {
		el.Value.(*accessEntry).check = check
		c.order.MoveToFront(el)
	} else {
		c.index[ak] = c.order.PushFront(&accessEntry{key: ak, check: check})
	}
	for el := c.order.Back(); el != nil && now.Sub(el.Value.(*accessEntry).check.at) >= accessRecheck; el = c.order.Back() {
		c.removeElement(el)
	}
	for c.order.Len() > c.size {
		c.removeElement(c.order.Back())
	}
}

// remove forgets ak: its check is outdated and failed again.
func (c *accessCache) remove(ak accessKey) {
	if el, ok := c.index[ak]; ok {
		c.removeElement(el)
	}
}

// forgetSecret forgets every check of a Secret that was deleted.
func (c *accessCache) forgetSecret(secret cache.ObjectName) {
	for ak, el := range c.index {
		if ak.secret == secret {
			c.removeElement(el)
		}
	}
}

func (c *accessCache) len() int { return c.order.Len() }

func (c *accessCache) removeElement(el *list.Element) {
	delete(c.index, c.order.Remove(el).(*accessEntry).key)
}
