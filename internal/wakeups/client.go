// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups

import (
	"strings"
)

// ClientName names a client by its user agent without the noise that
// changes from one build to the next: the version after the program's
// name, the "(os/arch)" part and client-go's "kubernetes/<commit>". What
// the program appended after them stays (kube-controller-manager adds the
// controller's name or its ServiceAccount):
//
//	kube-controller-manager/v1.37.1 (linux/amd64) kubernetes/abc123/system:serviceaccount:kube-system:job-controller
//	→ kube-controller-manager/system:serviceaccount:kube-system:job-controller
//
// An empty user agent is "-".
func ClientName(userAgent string) string {
	fields := strings.Fields(userAgent)
	if len(fields) == 0 {
		return "-"
	}
	var parts []string
	for i, f := range fields {
		switch {
		case i == 0:
			// program/version: keep the program.
			prog, _, _ := strings.Cut(f, "/")
			parts = append(parts, prog)
		case strings.HasPrefix(f, "(") || strings.HasSuffix(f, ")"):
			// (linux/amd64), or a comment of several words.
		case strings.HasPrefix(f, "kubernetes/"):
			// kubernetes/<commit>[/suffix...]: keep the suffix.
			rest := strings.TrimPrefix(f, "kubernetes/")
			if _, suffix, ok := strings.Cut(rest, "/"); ok && suffix != "" {
				parts = append(parts, suffix)
			}
		case versionLike(f):
		default:
			parts = append(parts, f)
		}
	}
	return strings.Join(parts, "/")
}

// versionLike tells a token that is a version: v1.2.3, 1.2, 2.0.
func versionLike(s string) bool {
	s = strings.TrimPrefix(s, "v")
	if s == "" || s[0] < '0' || s[0] > '9' {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return (r < '0' || r > '9') && r != '.' && r != '-' && r != '+' && (r < 'a' || r > 'z')
	}) < 0
}
