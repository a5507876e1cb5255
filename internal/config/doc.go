// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

// Package config holds the operator's run-time settings that come from the
// vidra-config ConfigMap (SPEC section 4): the periodic re-check interval and
// its jitter, whether drift is corrected on events, and the field managers
// whose writes count as hand edits. Parse turns the ConfigMap's data into a
// Config, keeping the previous value of any key that does not parse and
// reporting it; Watcher follows the ConfigMap with an informer so that a
// change applies without a restart, and a missing ConfigMap means defaults.
package config
