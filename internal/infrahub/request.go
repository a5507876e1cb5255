// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vidra-operator/vidra/internal/destination"
)

// maxErrorBody bounds what is read of an answer that is not a success, to
// classify it: Infrahub's error envelope is a few hundred bytes.
const maxErrorBody = 64 << 10

// maxRetryAfter bounds the Retry-After Vidra reports: a server could ask
// for a year, and callers cap their backoff anyway.
const maxRetryAfter = time.Hour

// request is one HTTP request to Infrahub.
type request struct {
	op     string
	method string
	// path is escaped, relative to the base URL.
	path  string
	query url.Values
	// body, when not nil, is sent as JSON.
	body any
	// limit bounds a successful answer.
	limit int64
	// accept is the Accept header ("" means application/json).
	accept string
}

// answer is an answer of Infrahub: a success, read whole within its bound,
// or any other status, its body cut at maxErrorBody.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends r with the Client's credentials, and returns a successful answer
// or an *Error. A 401 with a login's tokens costs one refresh or login and
// one more try, never more.
func (c *Client) do(ctx context.Context, r request) (*answer, error) {
	renewed := false
	for {
		var auth func(http.Header)
		var gen uint64
		switch {
		case c.creds.Token != "":
			auth = func(h http.Header) { h.Set("X-INFRAHUB-KEY", c.creds.Token) }
		case c.usesLogin():
			access, g, err := c.accessToken(ctx)
			if err != nil {
				return nil, err
			}
			gen = g
			auth = bearer(access)
		}
		a, err := c.exchange(ctx, r, auth)
		if err != nil {
			return nil, err
		}
		if a.status == http.StatusUnauthorized && c.usesLogin() && !renewed {
			renewed = true
			if err := c.renew(ctx, gen, expiredSignature(a.body)); err != nil {
				return nil, err
			}
			continue
		}
		if a.status/100 != 2 {
			e := c.refusal(r.op, a)
			if renewed && e.Kind == KindUnauthorized {
				e.detail = "the credentials were refused again after a new login"
			}
			return nil, e
		}
		return a, nil
	}
}

// bearer returns a function that sets token as the Authorization bearer.
func bearer(token string) func(http.Header) {
	return func(h http.Header) { h.Set("Authorization", "Bearer "+token) }
}

// exchange sends r once, within the Client's timeout, and reads its answer
// within its bound. It returns an error only when there is no answer to
// give: none came, it was a redirect, or it passed its bound.
func (c *Client) exchange(ctx context.Context, r request, auth func(http.Header)) (*answer, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var body io.Reader
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return nil, &Error{Op: r.op, Host: c.host, Kind: KindInvalid, detail: "the request body could not be written", err: err}
		}
		body = bytes.NewReader(b)
	}
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, &Error{Op: r.op, Host: c.host, Kind: KindInvalid, detail: "the request could not be built", err: err}
	}
	accept := r.accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth != nil {
		auth(req.Header)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.noAnswer(r.op, err)
	}
	// Closing a body not read to its end drops the connection rather than
	// reading the rest: a 50 MiB or endless answer costs what was read.
	defer resp.Body.Close()
	a := &answer{status: resp.StatusCode, header: resp.Header}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return nil, &Error{Op: r.op, Host: c.host, Kind: KindBadAnswer, Status: resp.StatusCode,
			detail: "Infrahub's API does not redirect, and Vidra follows no redirect (it would carry the credentials along)"}
	case resp.StatusCode/100 == 2:
		tooLarge := &Error{Op: r.op, Host: c.host, Kind: KindTooLarge, Status: resp.StatusCode, Limit: r.limit}
		if resp.ContentLength > r.limit {
			return nil, tooLarge
		}
		if a.body, err = readBounded(resp.Body, r.limit, resp.ContentLength); err != nil {
			if errors.Is(err, errOverBound) {
				return nil, tooLarge
			}
			e := c.noAnswer(r.op, err)
			e.Status = resp.StatusCode
			return nil, e
		}
	default:
		// What came of an error answer is enough to classify it; the rest
		// is not worth waiting for.
		a.body, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	}
	return a, nil
}

var errOverBound = errors.New("answer over its bound")

// readBounded reads r whole if it holds at most limit bytes, and fails with
// errOverBound as soon as it passes them. The buffer starts at length, if
// known (>= 0), or at 32 KiB, and doubles up to limit+1 at most: a refused
// answer costs about twice the bound in allocations, whatever its size.
func readBounded(r io.Reader, limit, length int64) ([]byte, error) {
	size := min(limit+1, 32<<10)
	if length >= 0 && length <= limit {
		size = length + 1
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, errOverBound
			}
			grown := make([]byte, len(buf), min(2*int64(cap(buf)), limit+1))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, errOverBound
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// noAnswer is the *Error of a request that got no (complete) answer, in
// Vidra's words: the cause's text may hold what the server sent (a TLS
// certificate's names), so it stays in Unwrap only.
func (c *Client) noAnswer(op string, err error) *Error {
	e := &Error{Op: op, Host: c.host, Kind: KindNetwork, err: err}
	var dnsErr *net.DNSError
	var netErr net.Error
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout():
		e.Kind, e.detail = KindTimeout, fmt.Sprintf("no complete answer within %s", c.timeout)
	case errors.Is(err, context.Canceled):
		e.Kind, e.detail = KindTimeout, "the request was cancelled"
	case errors.Is(err, errPlainHTTP):
		e.detail = "plain http is not allowed (run the operator with --allow-http-destinations to allow it)"
	case destination.IsDeniedAddress(err):
		e.detail = "its address is in --destination-cidr-deny, which Vidra does not connect to"
	case errors.As(err, &dnsErr):
		e.detail = "its name does not resolve"
	case errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) || errors.As(err, &verify):
		e.detail = "its TLS certificate is not trusted for that name (a private CA goes in spec.source.caSecretRef)"
	case errors.As(err, &record):
		e.detail = "it does not speak TLS (does spec.source.infrahubAPIURL have the right scheme?)"
	case errors.Is(err, syscall.ECONNREFUSED):
		e.detail = "it refused the connection"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		e.detail = "the connection broke off"
	default:
		e.detail = "the connection failed"
	}
	return e
}

// refusal is the *Error of an answer that is not a success.
func (c *Client) refusal(op string, a *answer) *Error {
	e := &Error{Op: op, Host: c.host, Status: a.status}
	e.setBody(a.body)
	switch s := a.status; {
	case s == http.StatusBadRequest || s == http.StatusUnprocessableEntity:
		e.Kind = KindBadRequest
		if op == OpLogin {
			e.Kind, e.detail = KindUnauthorized, "the login was refused as malformed (is the username or password empty?)"
		}
	case s == http.StatusUnauthorized:
		e.Kind = KindUnauthorized
		switch {
		case op == OpLogin:
			e.detail = "the password was refused, or the account is inactive"
		case c.creds.Token != "":
			e.detail = "the API token was refused"
		}
	case s == http.StatusForbidden:
		e.Kind = KindForbidden
		if c.creds == (Credentials{}) {
			e.detail = "no credentials were sent, and Infrahub answers queries only with credentials"
		}
	case s == http.StatusNotFound:
		e.Kind = KindNotFound
		if op == OpLogin {
			e.Kind, e.detail = KindUnauthorized, "Infrahub knows no account of that username"
		}
	case s == http.StatusTooManyRequests:
		e.Kind = KindTooManyRequests
		e.RetryAfter = retryAfter(a.header, c.clock.Now())
	case s == http.StatusBadGateway:
		// Infrahub answers a failed stored query with 502 and its
		// envelope; a gateway's 502 (the reverse proxy in front of it)
		// means Infrahub is not there.
		e.Kind = KindUnavailable
		if op == OpQuery && isEnvelope(a.body) {
			e.Kind = KindQueryError
		} else {
			e.detail = "a gateway's answer: Infrahub behind it did not answer"
		}
	case s == http.StatusServiceUnavailable || s == http.StatusGatewayTimeout:
		e.Kind = KindUnavailable
		e.RetryAfter = retryAfter(a.header, c.clock.Now())
	case s >= 500:
		e.Kind = KindServerError
	default:
		e.Kind, e.detail = KindBadAnswer, "a status Infrahub does not answer with here"
	}
	return e
}

// retryAfter reads Retry-After (seconds or an HTTP date), at most
// maxRetryAfter; 0 when absent or unreadable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil {
		if secs > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now).Round(time.Second)
	}
	return min(max(d, 0), maxRetryAfter)
}

// envelope is Infrahub's error envelope, as far as Vidra reads it: the
// messages, for decisions only (never copied into an error).
type envelope struct {
	Errors []json.RawMessage `json:"errors"`
}

// isEnvelope reports an answer with Infrahub's errors array.
func isEnvelope(body []byte) bool {
	var env envelope
	return json.Unmarshal(body, &env) == nil && len(env.Errors) > 0
}

// expiredSignature reports a 401 that says the access token expired
// (Infrahub's "Expired Signature"), which a refresh cures; other 401s
// ("Invalid token": the server's key changed) need a new login.
func expiredSignature(body []byte) bool {
	var env envelope
	if json.Unmarshal(body, &env) != nil {
		return false
	}
	for _, raw := range env.Errors {
		var m struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &m) == nil && strings.Contains(m.Message, "Expired Signature") {
			return true
		}
	}
	return false
}
