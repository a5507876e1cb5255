// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vidra-operator/vidra/internal/operator"
)

// RunOperator installs the VidraResource and InfrahubSync CRDs, creates the operator's
// namespace (opts.Namespace) and runs one operator in-process against e,
// until the returned stop is called. opts.Config is e's configuration with
// the rate limits of a busy test suite.
func RunOperator(ctx context.Context, e *Env, opts operator.Options) (*operator.Operator, func(), error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	if err := InstallCRDs(ctx, e.Config, filepath.Join(root, "manifests/crd/infrahub.operators.com_vidraresources.yaml"),
		filepath.Join(root, "manifests/crd/infrahub.operators.com_infrahubsyncs.yaml")); err != nil {
		return nil, nil, err
	}
	kube, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		return nil, nil, err
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.Namespace}}, metav1.CreateOptions{}); err != nil {
		return nil, nil, err
	}
	cfg := rest.CopyConfig(e.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	opts.Config = cfg
	ctx, cancel := context.WithCancel(ctx)
	op, err := operator.New(ctx, opts)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx) }()
	return op, func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Println("operator:", err)
		}
	}, nil
}
