// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package destination

import (
	"errors"
)

// secretNotFoundError says that the Secret a remote destination needs does
// not exist. During deletion it means the managed objects can no longer be
// reached: the finalizer is removed rather than held forever.
type secretNotFoundError struct{ msg string }

func (e *secretNotFoundError) Error() string { return e.msg }

func IsSecretGone(err error) bool {
	var nf *secretNotFoundError
	return errors.As(err, &nf)
}

// forbiddenSecretError says that the identity of a resource may not read
// the kubeconfig Secret it names: Vidra does not read it for them either.
type forbiddenSecretError struct{ msg string }

func (e *forbiddenSecretError) Error() string { return e.msg }
