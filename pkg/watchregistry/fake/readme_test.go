// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package fake_test

// The snippet is compiled as the README shows it, not run.
//lint:file-ignore U1000 compiled, not called

import (
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/vidra-operator/vidra/pkg/watchregistry"
	"github.com/vidra-operator/vidra/pkg/watchregistry/fake"
)

// readmeFake is "Unit tests with the fake clients" of the watch registry's
// README, compiled.
func readmeFake(scheme *runtime.Scheme, reg *watchregistry.Registry[string]) {
	dyn := dynamicfake.NewSimpleDynamicClient(scheme)
	fake.BumpResourceVersions(dyn) // creates, updates and patches get a new resourceVersion
	reg.SetCluster("", dyn, nil)
}
