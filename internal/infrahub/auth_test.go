// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vidra-operator/vidra/internal/infrahub"
	"github.com/vidra-operator/vidra/internal/infrahub/standin"
)

func TestClientLogsInOnceOverManyCalls(t *testing.T) {
	s := startStandin(t, standin.Options{})
	c := newClient(t, s, login)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for range 20 {
		wg.Go(func() {
			if _, err := c.Artifacts(ctx(t), byName); err != nil {
				errs <- err
			}
			if _, err := c.Download(ctx(t), infrahub.Source{}, "a0000000-0000-0000-0000-000000000001"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := s.Counts()
	if got.Login != 1 || s.Sessions() != 1 || got.Query != 20 || got.Download != 20 || got.Refresh != 0 {
		t.Errorf("counts %+v, sessions %d: want 1 login and session, 20 queries and downloads, no refresh", got, s.Sessions())
	}
}

func TestExpiredAccessTokenIsRefreshedOnceWithoutLogin(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Now())
	s := startStandin(t, standin.Options{Clock: clock, AccessLifetime: time.Minute})
	c := newClient(t, s, login)
	if _, err := c.Artifacts(ctx(t), byName); err != nil {
		t.Fatal(err)
	}
	clock.SetTime(clock.Now().Add(2 * time.Minute))
	// Many callers find the token expired at once: one refresh serves all.
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if _, err := c.Artifacts(ctx(t), byName); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := s.Counts(); got.Login != 1 || got.Refresh != 1 || got.Query < 11 || got.Query > 21 {
		t.Errorf("counts %+v: want 1 login, 1 refresh, each of the 11 queries answered (a refused one asked again once)", got)
	}
}

func TestRefusedRefreshLogsInAgain(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Now())
	s := startStandin(t, standin.Options{Clock: clock, AccessLifetime: time.Minute, RefreshLifetime: 2 * time.Minute})
	c := newClient(t, s, login)
	if _, err := c.Artifacts(ctx(t), byName); err != nil {
		t.Fatal(err)
	}
	clock.SetTime(clock.Now().Add(3 * time.Minute))
	if _, err := c.Artifacts(ctx(t), byName); err != nil {
		t.Fatal(err)
	}
	if got := s.Counts(); got.Login != 2 || got.Refresh != 1 || got.Query != 3 {
		t.Errorf("counts %+v: want the refresh refused, then one new login, and the query asked again", got)
	}
}

func TestRotatedSecretCostsOneNewLogin(t *testing.T) {
	s := startStandin(t, standin.Options{})
	c := newClient(t, s, login)
	if _, err := c.Artifacts(ctx(t), byName); err != nil {
		t.Fatal(err)
	}
	s.RotateSecret()
	for range 3 {
		if _, err := c.Artifacts(ctx(t), byName); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Counts(); got.Login != 2 || got.Refresh != 0 || got.Query != 5 {
		t.Errorf("counts %+v: want one new login (an invalid token is not refreshed), 4 answered queries and the refused one", got)
	}
}

func TestAPITokenSendsNoLogin(t *testing.T) {
	s := startStandin(t, standin.Options{DenyAnonymous: true})
	c := newClient(t, s, infrahub.Credentials{Token: apiToken, Username: user, Password: password})
	arts, err := c.Artifacts(ctx(t), byName)
	if err != nil || len(arts) != 2 {
		t.Fatalf("Artifacts = %v, %v; want the 2 artifacts", arts, err)
	}
	if _, err := c.Download(ctx(t), infrahub.Source{}, arts[0].ID); err != nil {
		t.Fatal(err)
	}
	if got := s.Counts(); got.Login != 0 || got.Refresh != 0 {
		t.Errorf("counts %+v: an API token logs nothing in", got)
	}

	bad := newClient(t, s, infrahub.Credentials{Token: "not-a-token"})
	_, err = bad.Artifacts(ctx(t), byName)
	if e := asError(t, err); e.Kind != infrahub.KindUnauthorized || e.Status != 401 || e.Retryable() {
		t.Errorf("a refused token: %+v, want Unauthorized 401, not retryable", e)
	}
	if got := s.Counts(); got.Login != 0 || got.Query != 2 {
		t.Errorf("counts %+v: a refused token is not retried and logs nothing in", got)
	}
}

func TestRefusedLoginIsUnauthorized(t *testing.T) {
	s := startStandin(t, standin.Options{})
	for _, tt := range []struct {
		name  string
		creds infrahub.Credentials
	}{
		{"bad password", infrahub.Credentials{Username: user, Password: "nope"}},
		{"unknown user", infrahub.Credentials{Username: "nobody", Password: "x"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s.ResetCounts()
			_, err := newClient(t, s, tt.creds).Artifacts(ctx(t), byName)
			e := asError(t, err)
			if e.Kind != infrahub.KindUnauthorized || e.Op != infrahub.OpLogin || e.Retryable() {
				t.Errorf("error %+v: want an Unauthorized login, not retryable", e)
			}
			if got := s.Counts(); got.Login != 1 || got.Query != 0 {
				t.Errorf("counts %+v: want one login, no query", got)
			}
		})
	}
}

func TestAnonymousQueryIsForbidden(t *testing.T) {
	s := startStandin(t, standin.Options{})
	c := newClient(t, s, infrahub.Credentials{})
	_, err := c.Artifacts(ctx(t), byName)
	if e := asError(t, err); e.Kind != infrahub.KindForbidden || e.Status != 403 {
		t.Errorf("error %+v: want Forbidden 403", e)
	}
	// GET passes anonymously, as in Infrahub.
	if _, err := c.Download(ctx(t), infrahub.Source{}, "a0000000-0000-0000-0000-000000000001"); err != nil {
		t.Errorf("anonymous download: %v", err)
	}
}

// TestLateRefusalOfARenewedTokenRenewsNothing: a request sent with the old
// token and refused after another caller already refreshed it uses the new
// token rather than refreshing again.
func TestLateRefusalOfARenewedTokenRenewsNothing(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Now())
	s := startStandin(t, standin.Options{Clock: clock, AccessLifetime: time.Minute})
	c := newClient(t, s, login)
	if _, err := c.Artifacts(ctx(t), byName); err != nil {
		t.Fatal(err)
	}
	clock.SetTime(clock.Now().Add(2 * time.Minute))
	// The late caller's request is held at the server while the other's is
	// refused, refreshed and answered.
	s.Fault(standin.Fault{Endpoint: standin.EndpointQuery, Delay: time.Second})
	late := make(chan error, 1)
	go func() {
		_, err := c.Artifacts(ctx(t), byName)
		late <- err
	}()
	if err := wait.PollUntilContextTimeout(ctx(t), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return s.Counts().Query == 2, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Artifacts(ctx(t), byName); err != nil {
		t.Fatal(err)
	}
	if err := <-late; err != nil {
		t.Fatal(err)
	}
	if got := s.Counts(); got.Refresh != 1 || got.Login != 1 {
		t.Errorf("counts %+v: want one refresh for both refusals of the same token", got)
	}
}
