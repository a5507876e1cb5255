// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package operator

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	v1alpha1 "github.com/vidra-operator/vidra/pkg/apis/infrahub/v1alpha1"
)

// elector wraps client-go's LeaderElector, whose callbacks must be set before
// it is built; the controller callback is only known in Run.
type elector struct {
	cfg      leaderelection.LeaderElectionConfig
	elector  *leaderelection.LeaderElector
	health   *leaderelection.HealthzAdaptor
	identity string
}

func (o *Operator) leaderElector() (*elector, error) {
	le := o.opts.LeaderElection
	if !le.Enabled {
		return nil, nil
	}
	if le.Namespace == "" {
		le.Namespace = o.opts.Namespace
	}
	if le.Name == "" {
		le.Name = "vidra-leader"
	}
	if le.Identity == "" {
		host, _ := os.Hostname()
		le.Identity = host + "_" + rand.String(6)
	}
	if le.LeaseDuration == 0 {
		le.LeaseDuration = 15 * time.Second
	}
	if le.RenewDeadline == 0 {
		le.RenewDeadline = 10 * time.Second
	}
	if le.RetryPeriod == 0 {
		le.RetryPeriod = 2 * time.Second
	}
	// The Lease's writes are recorded under a manager name of their own:
	// nothing about the Lease may look like Vidra's apply of a managed
	// object.
	cfg := rest.CopyConfig(o.opts.Config)
	cfg.UserAgent = v1alpha1.LeaderElectionFieldManager
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	health := leaderelection.NewLeaderHealthzAdaptor(le.LeaseDuration / 2)
	return &elector{
		identity: le.Identity,
		health:   health,
		cfg: leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1ObjectMeta(le.Namespace, le.Name),
				Client:     client.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
			},
			LeaseDuration: le.LeaseDuration,
			RenewDeadline: le.RenewDeadline,
			RetryPeriod:   le.RetryPeriod,
			// Hand the lease over at shutdown, so that a rolling update does
			// not wait a whole lease duration for the next leader.
			ReleaseOnCancel: true,
			WatchDog:        health,
			Name:            "vidra",
		},
	}, nil
}

// callbacks sets what to run while leading and builds the elector.
func (e *elector) callbacks(lead func(ctx context.Context)) {
	e.cfg.Callbacks = leaderelection.LeaderCallbacks{
		OnStartedLeading: lead,
		OnStoppedLeading: func() {},
		OnNewLeader: func(identity string) {
			klog.Background().Info("Leader elected", "leader", identity, "self", identity == e.identity)
		},
	}
	le, err := leaderelection.NewLeaderElector(e.cfg)
	if err != nil {
		// The config is built above from validated durations; an error here
		// is a programming error.
		panic(fmt.Sprintf("leader election config: %v", err))
	}
	e.elector = le
	e.health.SetLeaderElection(le)
}
