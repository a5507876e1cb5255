// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
)

// maxTokenBytes bounds a token Infrahub gives: it is sent back as a header
// on every request. Infrahub's JWTs are about 300 bytes.
const maxTokenBytes = 8 << 10

// maxLoginAnswer bounds a login's or refresh's answer.
const maxLoginAnswer = 64 << 10

// usesLogin reports whether the Client logs in (username and password, no
// API token).
func (c *Client) usesLogin() bool { return c.creds.Token == "" && c.creds.Username != "" }

// accessToken returns the access token and its generation, logging in
// first if the Client has none.
func (c *Client) accessToken(ctx context.Context) (string, uint64, error) {
	for {
		c.mu.Lock()
		access, gen := c.access, c.gen
		c.mu.Unlock()
		if access != "" {
			return access, gen, nil
		}
		if err := c.renew(ctx, gen, false); err != nil {
			return "", 0, err
		}
	}
}

// renew replaces the access token of generation used, which Infrahub
// refused (or which does not exist yet): by a refresh when it expired, by
// a login otherwise or when the refresh is refused. Of many callers
// refused with the same token, one renews it and the others wait for it:
// Infrahub keeps a node in its database for every login.
func (c *Client) renew(ctx context.Context, used uint64, expired bool) error {
	c.mu.Lock()
	if c.gen != used {
		// Renewed by another caller since this one read the token.
		c.mu.Unlock()
		return nil
	}
	if r := c.renewing; r != nil {
		// Another caller renews the same token: its outcome is this one's.
		c.mu.Unlock()
		select {
		case <-r.done:
			return r.err
		case <-ctx.Done():
			return c.noAnswer(OpLogin, ctx.Err())
		}
	}
	r := &renewal{done: make(chan struct{})}
	c.renewing = r
	refresh := c.refresh
	c.mu.Unlock()

	access, newRefresh, err := c.obtain(ctx, refresh, expired)

	c.mu.Lock()
	if err == nil {
		c.access, c.refresh = access, newRefresh
		c.gen++
	}
	r.err = err
	c.renewing = nil
	close(r.done)
	c.mu.Unlock()
	return err
}

// renewal is a renewal of the access token in flight; err is its outcome
// once done is closed.
type renewal struct {
	done chan struct{}
	err  error
}

// obtain gets a new access token: by refresh when the last one expired and
// there is a refresh token, falling back to a login when Infrahub refuses
// the refresh (not when it is unavailable: a login would fail too, and
// leave a node behind if it did not).
func (c *Client) obtain(ctx context.Context, refresh string, expired bool) (access, newRefresh string, err error) {
	if expired && refresh != "" {
		access, err := c.refreshAccess(ctx, refresh)
		if err == nil {
			return access, refresh, nil
		}
		var e *Error
		if !errors.As(err, &e) || e.Status < 400 || e.Status >= 500 || e.Kind == KindTooManyRequests {
			return "", "", err
		}
	}
	return c.login(ctx)
}

// login logs in with the Client's username and password.
func (c *Client) login(ctx context.Context) (access, refresh string, err error) {
	a, err := c.exchange(ctx, request{
		op: OpLogin, method: http.MethodPost, path: "/api/auth/login", limit: maxLoginAnswer,
		body: map[string]string{"username": c.creds.Username, "password": c.creds.Password},
	}, nil)
	if err != nil {
		return "", "", err
	}
	if a.status/100 != 2 {
		return "", "", c.refusal(OpLogin, a)
	}
	var tokens struct {
		Access  string `json:"access_token"`
		Refresh string `json:"refresh_token"`
	}
	if json.Unmarshal(a.body, &tokens) != nil || !validToken(tokens.Access) || !validToken(tokens.Refresh) {
		e := &Error{Op: OpLogin, Host: c.host, Kind: KindBadAnswer, Status: a.status, detail: "the login's answer holds no usable tokens"}
		e.setBody(a.body)
		return "", "", e
	}
	return tokens.Access, tokens.Refresh, nil
}

// refreshAccess asks for a new access token with the refresh token.
func (c *Client) refreshAccess(ctx context.Context, refresh string) (string, error) {
	a, err := c.exchange(ctx, request{op: OpRefresh, method: http.MethodPost, path: "/api/auth/refresh", limit: maxLoginAnswer}, bearer(refresh))
	if err != nil {
		return "", err
	}
	if a.status/100 != 2 {
		return "", c.refusal(OpRefresh, a)
	}
	var tokens struct {
		Access string `json:"access_token"`
	}
	if json.Unmarshal(a.body, &tokens) != nil || !validToken(tokens.Access) {
		e := &Error{Op: OpRefresh, Host: c.host, Kind: KindBadAnswer, Status: a.status, detail: "the refresh's answer holds no usable token"}
		e.setBody(a.body)
		return "", e
	}
	return tokens.Access, nil
}

// validToken reports a token Vidra may send back in a header: visible
// ASCII, at most maxTokenBytes.
func validToken(t string) bool {
	if t == "" || len(t) > maxTokenBytes {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] > '~' {
			return false
		}
	}
	return true
}
