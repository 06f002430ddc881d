package main

import (
	"context"
	"flag"
	"io"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestSecurityFlags(t *testing.T) {
	var f securityFlags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	if err := fs.Parse([]string{"--service-tag", "AzureFrontDoor.Backend=127.1.2.0/24, 127.1.3.4", "--service-tag", "azurefrontdoor.backend=127.1.4.0/24",
		"--service-tag", "MyTag=fd00::/64", "--internet-prefixes", "127.0.0.1/32,127.64.0.0/16"}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]netip.Prefix{
		"AzureFrontDoor.Backend": {netip.MustParsePrefix("127.1.2.0/24"), netip.MustParsePrefix("127.1.3.4/32"), netip.MustParsePrefix("127.1.4.0/24")},
		"MyTag":                  {netip.MustParsePrefix("fd00::/64")},
	}
	if !reflect.DeepEqual(f.tags, want) {
		t.Fatalf("tags %v, want %v", f.tags, want)
	}
	in, err := f.internetPrefixes()
	if err != nil || !reflect.DeepEqual(in, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("127.64.0.0/16")}) {
		t.Fatalf("internet prefixes %v, %v", in, err)
	}
	for _, v := range []string{"none", ""} {
		f.internet = v
		if in, err := f.internetPrefixes(); err != nil || in == nil || len(in) != 0 {
			t.Fatalf("--internet-prefixes %q: %v, %v", v, in, err)
		}
	}
	var d securityFlags
	d.register(flag.NewFlagSet("d", flag.ContinueOnError))
	if in, err := d.internetPrefixes(); err != nil || len(in) != 1 || in[0].String() != "127.0.0.0/8" {
		t.Fatalf("default internet prefixes %v, %v", in, err)
	}
	for _, bad := range []string{"NoEquals", "=127.0.0.1", "T=", "T=x", "T=127.0.0.0/33"} {
		if err := f.addTag(bad); err == nil {
			t.Errorf("--service-tag %q accepted", bad)
		}
	}
}

func TestServeRejectsBadSecurityFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--service-tag", "x", "--listen", "127.0.0.1:0"},
		{"--internet-prefixes", "bogus", "--listen", "127.0.0.1:0"},
		{"--service-tag", "Internet=127.0.0.0/8", "--listen", "127.0.0.1:0"},
		{"--service-tag", "1bad=127.0.0.0/8", "--listen", "127.0.0.1:0"},
	} {
		var out, errOut syncBuffer
		if code := serve(context.Background(), args, &out, &errOut); code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
}

// TestServeRejectsBadNetworkFlags: the data plane's network namespace
// flags are refused without --data-plane, without prefixes, with a bad
// prefix or probe source, with a file that is no namespace, and a public
// range outside both loopback and the namespace's prefixes; each with
// exit code 2 (usage) or 1 (the emulator refused the namespace), and a
// message naming the flag or the reason.
func TestServeRejectsBadNetworkFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--data-plane-netns", "/proc/self/ns/net", "--data-plane-prefixes", "10.224.0.0/16"}, "--data-plane-netns needs --data-plane"},
		{[]string{"--data-plane", "--data-plane-prefixes", "10.224.0.0/16"}, "need --data-plane-netns"},
		{[]string{"--data-plane", "--data-plane-netns", "/proc/self/ns/net"}, "needs --data-plane-prefixes"},
		{[]string{"--data-plane", "--data-plane-netns", "/proc/self/ns/net", "--data-plane-prefixes", "bogus"}, "--data-plane-prefixes"},
		{[]string{"--data-plane", "--data-plane-netns", "/proc/self/ns/net", "--data-plane-prefixes", "10.224.0.0/16", "--data-plane-probe-source", "x"}, "--data-plane-probe-source"},
		{[]string{"--data-plane", "--data-plane-netns", "/etc/hostname", "--data-plane-prefixes", "10.224.0.0/16"}, "not a network namespace"},
		{[]string{"--data-plane", "--data-plane-netns", "/proc/self/ns/net", "--data-plane-prefixes", "10.224.0.0/16", "--public-ipv4-cidr", "198.18.0.0/24"}, "PublicIPv4CIDR"},
		{[]string{"--data-plane", "--data-plane-netns", "/proc/self/ns/net", "--data-plane-prefixes", "127.64.0.0/16"}, "overlaps loopback"},
	} {
		var out, errOut syncBuffer
		if code := serve(context.Background(), append(c.args, "--listen", "127.0.0.1:0"), &out, &errOut); code == 0 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want an error with %q", c.args, code, errOut.String(), c.want)
		}
	}
}
