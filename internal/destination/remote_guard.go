package destination

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Guard limits where remote destinations may lead. A tenant chooses
// the server of a remote destination: without limits Vidra would carry
// requests, from inside the cluster, to any address it can reach.
type Guard struct {
	// AllowHTTP accepts servers named with http://, whose requests, bearer
	// tokens and manifests included, travel in clear text.
	AllowHTTP bool
	// DenyCIDRs are the address ranges no remote destination may connect
	// to, checked on the address a server's name resolves to when it is
	// dialled. Nil means DefaultDenyCIDRs; an empty slice denies nothing.
	DenyCIDRs []netip.Prefix
	// SlowAnswer is how long a remote server may take to answer a request
	// a reconcile waits for before Vidra treats it as unavailable; zero
	// means DefaultSlowAnswer.
	SlowAnswer time.Duration
}

// DefaultDenyCIDRs are the link-local ranges, where clouds serve instance
// metadata and credentials (169.254.169.254, fd00:ec2::254 aside). Loopback
// stays allowed: a remote destination on the operator's own host is a test
// setup, not an attack on a neighbour.
func DefaultDenyCIDRs() []netip.Prefix {
	return []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10")}
}

// ParseCIDRs parses a comma-separated list of CIDRs, as
// --destination-cidr-deny takes them; an empty string is an empty list.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	out := []netip.Prefix{}
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("CIDR %q: %w", f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// remoteGuard applies a Guard to the clients of remote destinations.
type remoteGuard struct {
	allowHTTP bool
	deny      []netip.Prefix
	slow      time.Duration
	dialer    *net.Dialer
	resolver  *net.Resolver
}

func newRemoteGuard(g Guard) (*remoteGuard, error) {
	deny := g.DenyCIDRs
	if deny == nil {
		deny = DefaultDenyCIDRs()
	}
	for _, p := range deny {
		if !p.IsValid() {
			return nil, fmt.Errorf("destination CIDR deny list: invalid prefix %v", p)
		}
	}
	return &remoteGuard{
		allowHTTP: g.AllowHTTP,
		deny:      deny,
		slow:      g.SlowAnswer,
		// The timeouts of client-go's own dialer.
		dialer:   &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second},
		resolver: net.DefaultResolver,
	}, nil
}

// checkServer refuses a server URL the guard does not allow before any
// connection is made.
func (g *remoteGuard) checkServer(server string) error {
	u, err := url.Parse(server)
	if err != nil {
		return fmt.Errorf("server %q: %w", server, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !g.allowHTTP {
			return fmt.Errorf("server %s is plain http, which would send credentials and manifests in clear text; use https (or run the operator with --allow-http-destinations)", server)
		}
	default:
		return fmt.Errorf("server %q: scheme %q is not https", server, u.Scheme)
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil {
		if p, denied := g.denied(a); denied {
			return &deniedAddressError{host: u.Hostname(), addr: a, prefix: p}
		}
	}
	return nil
}

// deniedAddressError says that a server resolves to an address of
// --destination-cidr-deny.
type deniedAddressError struct {
	host   string
	addr   netip.Addr
	prefix netip.Prefix
}

func (e *deniedAddressError) Error() string {
	if e.host == e.addr.String() {
		return fmt.Sprintf("address %s is in %s, which remote destinations may not reach (--destination-cidr-deny)", e.addr, e.prefix)
	}
	return fmt.Sprintf("%s resolves to %s, in %s, which remote destinations may not reach (--destination-cidr-deny)", e.host, e.addr, e.prefix)
}

func (g *remoteGuard) denied(a netip.Addr) (netip.Prefix, bool) {
	a = a.Unmap()
	for _, p := range g.deny {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// dial is the DialContext of remote clients. It resolves the host itself and
// connects to a checked address, never to the name: a name that resolves to
// an allowed address when checked and to a denied one when dialled (DNS
// rebinding) cannot slip through.
func (g *remoteGuard) dial(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	ips, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, ip := range ips {
		if p, denied := g.denied(ip); denied {
			errs = append(errs, &deniedAddressError{host: host, addr: ip.Unmap(), prefix: p})
			continue
		}
		conn, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%s resolves to no address", host)
	}
	return nil, errors.Join(errs...)
}

// noProxy keeps remote destinations off any proxy of the operator's
// environment (HTTPS_PROXY): behind a proxy the address checked would be
// the proxy's, and the proxy would reach denied ranges on Vidra's behalf.
func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

// wrapAnswers is a rest.Config WrapTransport for remote clients: answers
// that are not a Kubernetes API server's are replaced before client-go
// reads them. client-go copies a text body into its error, and a JSON body
// without a kind into its decoding error, and those errors end in status
// conditions and Events, which tenants read: any server Vidra can reach
// would otherwise answer the tenant through them.
func (g *remoteGuard) wrapAnswers(server string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper { return &answerGuard{server: server, next: rt} }
}

type answerGuard struct {
	server string
	next   http.RoundTripper
}

// maxErrorBody bounds what is read of an error answer to check it: a
// Kubernetes Status is a few hundred bytes.
const maxErrorBody = 64 << 10

func (t *answerGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp == nil {
		return resp, err
	}
	ok, body, rerr := kubernetesAnswer(req, resp)
	if rerr != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("read the answer of %s: %w", t.server, rerr)
	}
	if ok {
		if body != nil {
			resp.Body = io.NopCloser(bytes.NewReader(body))
		}
		return resp, nil
	}
	resp.Body.Close()
	klog.FromContext(req.Context()).V(2).Info("Replaced an answer that is not a Kubernetes API server's",
		"server", t.server, "path", req.URL.Path, "code", resp.StatusCode, "contentType", resp.Header.Get("Content-Type"))
	return foreignAnswer(req, resp, t.server), nil
}

// WrappedRoundTripper lets client-go reach the transport underneath.
func (t *answerGuard) WrappedRoundTripper() http.RoundTripper { return t.next }

// kubernetesAnswer reports whether resp looks like an answer of a
// Kubernetes API server: JSON or protobuf, an error in a Status, an object
// that names its kind. When it had to read the body to tell, it returns
// what it read, for the caller to put back.
func kubernetesAnswer(req *http.Request, resp *http.Response) (bool, []byte, error) {
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// Followed by the HTTP client, whose next request comes through here.
		return true, nil, nil
	}
	media, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return false, nil, nil
	}
	protobuf := media == "application/vnd.kubernetes.protobuf"
	if media != "application/json" && !protobuf {
		return false, nil, nil
	}
	if params["stream"] == "watch" || isWatch(req) {
		// A watch answers with a stream that never ends, which must not be
		// read here; its decoding errors reach the log, never a status.
		return true, nil, nil
	}
	ok2xx := resp.StatusCode >= 200 && resp.StatusCode < 300
	if protobuf {
		// client-go's protobuf decoding errors never quote the body.
		return true, nil, nil
	}
	if ok2xx && req.URL.Path == "/version" {
		// Decoded into a fixed struct: unknown fields are dropped, nothing
		// of the body reaches an error.
		return true, nil, nil
	}
	r := io.Reader(resp.Body)
	if !ok2xx {
		r = io.LimitReader(resp.Body, maxErrorBody)
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return false, nil, err
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(body, &tm); err != nil || tm.Kind == "" {
		return false, nil, nil
	}
	switch {
	case !ok2xx && (tm.Kind != "Status" || tm.APIVersion != "v1"):
		return false, nil, nil
	case tm.APIVersion == "" && !isDiscoveryKind(tm.Kind):
		// The dynamic client's decoder quotes an object without apiVersion.
		return false, nil, nil
	}
	return true, body, nil
}

// isDiscoveryKind reports the answers of discovery that may carry no
// apiVersion; client-go decodes them into fixed structs.
func isDiscoveryKind(kind string) bool {
	switch kind {
	case "APIVersions", "APIGroupList", "APIGroup", "APIResourceList":
		return true
	}
	return false
}

// isWatch reports a watch request (client-go's ?watch=true), whose JSON
// answer the API server sends as plain application/json.
func isWatch(req *http.Request) bool {
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// foreignAnswer is what client-go reads instead of an answer that is not
// Kubernetes': the HTTP code and a fixed text of Vidra's, none of the body.
// It is plain text, which client-go quotes in its error whatever the
// request (a Status would be lost on discovery's requests, which read the
// raw answer).
func foreignAnswer(req *http.Request, resp *http.Response, server string) *http.Response {
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if media == "" {
		media = "no content type"
	}
	body := fmt.Sprintf("the server at %s answered HTTP %d with a body that is not a Kubernetes API answer (%s; not shown): is destination.server a Kubernetes API server?",
		server, resp.StatusCode, media)
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", http.StatusBadGateway, http.StatusText(http.StatusBadGateway)),
		StatusCode:    http.StatusBadGateway,
		Proto:         resp.Proto,
		ProtoMajor:    resp.ProtoMajor,
		ProtoMinor:    resp.ProtoMinor,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
