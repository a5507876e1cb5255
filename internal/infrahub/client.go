// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package infrahub

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/vidra-operator/vidra/internal/destination"
)

// The defaults of Options. A default is written once, here.
const (
	// DefaultTimeout bounds one call to Infrahub, from dialling to the
	// answer's last byte: a worker waits for it, so it must be seconds, not
	// minutes. A query over a few hundred artifacts answers in well under a
	// second on a healthy Infrahub.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxResponseBytes bounds a query's (or a login's) answer: about
	// 20,000 artifacts as Vidra's query selects them.
	DefaultMaxResponseBytes = 4 << 20
	// DefaultMaxArtifactBytes bounds an artifact's content: it becomes a
	// VidraResource's spec.manifest, and an object of the API server holds
	// about 1.5 MiB at most, its metadata and status included.
	DefaultMaxArtifactBytes = 1 << 20
)

// Source says which artifacts to ask Infrahub for, and as of when.
type Source struct {
	// Branch is the Infrahub branch; "" means Infrahub's default branch.
	// Branch names may contain "/".
	Branch string
	// At is Infrahub's "at" (see ValidateAt); "" means now.
	At string
	// QueryName is the stored query to run (POST /api/query/{name}) with the
	// string variable "artifactname"; "" means Vidra's own GraphQL query on
	// /graphql/{branch}. A stored query Infrahub does not know (404) falls
	// back to Vidra's own query, and the Client remembers it so that the 404
	// is not paid on every poll.
	QueryName string
	// ArtifactName is the name every artifact of the definition carries
	// (the definition's artifact_name).
	ArtifactName string
	// DefinitionName, when set, selects the artifacts of the artifact
	// definition of that name instead of by ArtifactName, in Vidra's own
	// query; a stored query gets ArtifactName only.
	DefinitionName string
}

// Credentials are what a Client authenticates with. Token, when set, is
// sent as X-INFRAHUB-KEY on every request and nothing logs in; otherwise
// Username and Password log in once, and the tokens are reused. All empty
// means anonymous, which Infrahub allows for GET only: a query needs
// credentials.
type Credentials struct {
	Username, Password string
	Token              string
}

// Options configure a Client. The zero value of each field is its default.
type Options struct {
	// HTTPClient makes the requests; nil means NewHTTPClient(HTTPOptions{}),
	// https only, with the default CIDR deny list. Its own Timeout, if any,
	// applies besides Timeout.
	HTTPClient *http.Client
	// AllowHTTP accepts a base URL with http://, whose credentials and
	// answers travel in clear text (--allow-http-destinations). The
	// HTTPClient must allow it too.
	AllowHTTP bool
	// Credentials authenticate the Client.
	Credentials Credentials
	// Timeout bounds one call; 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxResponseBytes bounds a query's or login's answer; 0 means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// MaxArtifactBytes bounds an artifact's content; 0 means
	// DefaultMaxArtifactBytes.
	MaxArtifactBytes int64
	// Clock reads the time for Retry-After dates; nil means the real clock.
	Clock clock.PassiveClock
}

// Client talks to one Infrahub server with one set of credentials. It is
// safe for concurrent use; keep one per (server, credentials, CA) between
// reconciles, since it holds the tokens of its login.
type Client struct {
	base        string // scheme://host[:port][/path], no trailing slash
	host        string // for Vidra's messages
	http        *http.Client
	creds       Credentials
	timeout     time.Duration
	maxResponse int64
	maxArtifact int64
	clock       clock.PassiveClock

	mu sync.Mutex
	// access and refresh are the tokens of the last login; gen counts the
	// access tokens obtained, so that of many requests refused with the
	// same token only one renews it; renewing is the renewal in flight, if
	// any, which the others wait for.
	access, refresh string
	gen             uint64
	renewing        *renewal
	// missing holds when Infrahub answered 404 for a stored query: the
	// Client asks Vidra's own query instead until storedQueryRecheck has
	// passed.
	missing map[string]time.Time
}

// storedQueryRecheck is how long a stored query Infrahub did not know is
// not asked for again: a person who creates it is heard within the hour,
// and a poll every minute does not pay a 404 every minute.
const storedQueryRecheck = time.Hour

// New returns a Client of the Infrahub at baseURL (e.g.
// https://infrahub.example.com). The URL must be https (or http with
// opts.AllowHTTP), without user information, query or fragment; a path is
// kept as a prefix, for an Infrahub behind a reverse proxy.
func New(baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, errors.New("the Infrahub URL does not parse as a URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !opts.AllowHTTP {
			return nil, fmt.Errorf("the Infrahub URL %s is plain http, which would send credentials in clear text; use https (or run the operator with --allow-http-destinations)", u.Redacted())
		}
	default:
		return nil, errors.New("the Infrahub URL must start with https://")
	}
	switch {
	case u.Host == "":
		return nil, errors.New("the Infrahub URL has no host")
	case u.User != nil:
		return nil, errors.New("the Infrahub URL must not hold user information; put credentials in the credentials Secret")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "":
		return nil, errors.New("the Infrahub URL must have no query or fragment")
	}
	httpClient := opts.HTTPClient
	if httpClient == nil {
		if httpClient, err = NewHTTPClient(HTTPOptions{Guard: destination.Guard{AllowHTTP: opts.AllowHTTP}}); err != nil {
			return nil, err
		}
	}
	c := &Client{
		base:        strings.ToLower(u.Scheme) + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"),
		host:        u.Host,
		http:        httpClient,
		creds:       opts.Credentials,
		timeout:     opts.Timeout,
		maxResponse: opts.MaxResponseBytes,
		maxArtifact: opts.MaxArtifactBytes,
		clock:       opts.Clock,
		missing:     map[string]time.Time{},
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxResponse <= 0 {
		c.maxResponse = DefaultMaxResponseBytes
	}
	if c.maxArtifact <= 0 {
		c.maxArtifact = DefaultMaxArtifactBytes
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	return c, nil
}

// Host returns the server's host[:port], as Vidra's messages name it.
func (c *Client) Host() string { return c.host }
