// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package guard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestRemoteGuardChecksTheServerURL(t *testing.T) {
	tests := []struct {
		name   string
		guard  Config
		server string
		want   string // a fragment of the refusal; empty: allowed
	}{
		{name: "https", server: "https://cluster.example:6443"},
		{name: "loopback is allowed by default", server: "https://127.0.0.1:6443"},
		{name: "http is refused", server: "http://cluster.example", want: "--allow-http-destinations"},
		{name: "http when allowed", guard: Config{AllowHTTP: true}, server: "http://cluster.example"},
		{name: "another scheme", server: "ftp://cluster.example", want: "not https"},
		{name: "cloud metadata", server: "https://169.254.169.254", want: "169.254.0.0/16"},
		{name: "IPv6 link-local", server: "https://[fe80::1]:443", want: "fe80::/10"},
		{name: "IPv4-mapped metadata", server: "https://[::ffff:169.254.169.254]", want: "169.254.0.0/16"},
		{name: "an empty deny list denies nothing", guard: Config{DenyCIDRs: []netip.Prefix{}}, server: "https://169.254.169.254"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := newTest(t, tc.guard).CheckServer(tc.server)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v; want a refusal naming %q", err, tc.want)
			}
		})
	}
}

func TestParseCIDRs(t *testing.T) {
	got, err := ParseCIDRs(" 169.254.0.0/16, fe80::/10 ,,10.1.2.3/8")
	if err != nil {
		t.Fatal(err)
	}
	want := "[169.254.0.0/16 fe80::/10 10.0.0.0/8]"
	if fmt.Sprint(got) != want {
		t.Errorf("got %v; want %v", got, want)
	}
	if got, err := ParseCIDRs(""); err != nil || got == nil || len(got) != 0 {
		t.Errorf("empty string: %v, %v; want an empty, non-nil list", got, err)
	}
	if _, err := ParseCIDRs("10.0.0.0"); err == nil {
		t.Error("an address without a prefix length was accepted")
	}
}

// TestDialerChecksTheResolvedAddress: the check is on the address dialled,
// whatever name the server has.
func TestDialerChecksTheResolvedAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	loopback, err := ParseCIDRs("127.0.0.0/8,::1/128")
	if err != nil {
		t.Fatal(err)
	}

	conn, err := newTest(t, Config{}).Dial(t.Context(), "tcp", net.JoinHostPort("localhost", port))
	if err != nil {
		t.Fatalf("loopback refused with the default deny list: %v", err)
	}
	conn.Close()

	for _, host := range []string{"localhost", "127.0.0.1"} {
		_, err := newTest(t, Config{DenyCIDRs: loopback}).Dial(t.Context(), "tcp", net.JoinHostPort(host, port))
		var denied *deniedAddressError
		if !errors.As(err, &denied) {
			t.Fatalf("%s dialled although loopback is denied: %v", host, err)
		}
		if !strings.Contains(err.Error(), "--destination-cidr-deny") {
			t.Errorf("the refusal does not name the flag: %v", err)
		}
	}
}
