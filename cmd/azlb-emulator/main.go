package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/emulator/replay"
	"github.com/azlb/azlb/internal/version"
)

func main() {
	// The emulator keeps a small live heap and allocates per request; a
	// higher GC target trades a little memory for fewer collections (an
	// explicit GOGC still wins).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without os.Exit, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "replay" {
		return runReplay(args[1:], stdout, stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, args, stdout, stderr)
}

// defaultCAFile is where the CA certificate is written unless --ca-file says
// otherwise.
func defaultCAFile() string { return filepath.Join(os.TempDir(), "azlb-emulator-ca.pem") }

type identityFlags struct {
	tenant, client, secret string
	// certFiles hold certificates (PEM) registered on the client.
	certFiles []string
	certs     []*x509.Certificate
	tenants   []emulator.Tenant
}

func (f *identityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.tenant, "tenant-id", emulator.DefaultTenantID, "tenant id of the accepted client-credentials identity")
	fs.StringVar(&f.client, "client-id", emulator.DefaultClientID, "client id of the accepted identity")
	fs.StringVar(&f.secret, "client-secret", "", "client secret of the accepted identity (default \""+emulator.DefaultClientSecret+"\"; or set AZLB_EMULATOR_CLIENT_SECRET)")
	fs.Func("additional-tenant", "`TENANT=SUBSCRIPTION[,SUBSCRIPTION...]`: another tenant, holding those subscriptions (every other is --tenant-id's), where the accepted identity is registered too; ARM then applies its rules across tenants (docs/emulator.md, Tenants); repeatable", func(v string) error {
		id, subs, ok := strings.Cut(v, "=")
		if !ok || id == "" || subs == "" {
			return errors.New("want TENANT=SUBSCRIPTION[,SUBSCRIPTION...]")
		}
		f.tenants = append(f.tenants, emulator.Tenant{ID: id, Subscriptions: strings.Split(subs, ",")})
		return nil
	})
	fs.Func("client-certificate", "a PEM `file` of certificates registered on the accepted identity: a client assertion signed with one's key authenticates it (certificate credentials); repeatable", func(p string) error {
		f.certFiles = append(f.certFiles, p)
		return nil
	})
}

func (f *identityFlags) resolve() error {
	if f.secret == "" {
		f.secret = os.Getenv("AZLB_EMULATOR_CLIENT_SECRET")
	}
	if f.secret == "" {
		f.secret = emulator.DefaultClientSecret
	}
	for _, p := range f.certFiles {
		certs, err := readCertificates(p)
		if err != nil {
			return fmt.Errorf("--client-certificate %s: %w", p, err)
		}
		f.certs = append(f.certs, certs...)
	}
	return nil
}

// readCertificates reads the CERTIFICATE blocks of a PEM file (other
// blocks, such as a private key beside them, are skipped).
func readCertificates(path string) ([]*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("holds no PEM certificate")
	}
	return out, nil
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("azlb-emulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8443", "address to listen on (loopback by default)")
	plain := fs.Bool("http", false, "serve plain HTTP instead of TLS (MSAL/azidentity require HTTPS)")
	caFile := fs.String("ca-file", defaultCAFile(), "file the generated CA certificate (PEM) is written to")
	latency := fs.Duration("latency", 0, "latency added to every ARM call")
	opDur := fs.Duration("operation-duration", 0, "how long asynchronous operations stay InProgress")
	var throttle throttleFlags
	throttle.register(fs)
	v4 := fs.String("public-ipv4-cidr", "", "range public IPv4 addresses are allocated from (default "+emulator.DefaultPublicIPv4CIDR+", or "+emulator.DefaultDataPlanePublicIPv4CIDR+" with --data-plane)")
	dataPlane := fs.Bool("data-plane", false, "carry real TCP on loopback for load balancing rules whose frontend and members are loopback addresses (see docs/data-plane.md)")
	v6 := fs.String("public-ipv6-cidr", emulator.DefaultPublicIPv6CIDR, "range public IPv6 addresses are allocated from")
	sgwPost := fs.Int("sgw-post-status", emulator.SGWPostOK, "how updateServices/updateAddressLocations answer: 200 (as NRP does) or 202 (as the specification says)")
	sgwPage := fs.Int("sgw-page-size", emulator.DefaultSGWPageSize, "items per page of GET services / addressLocations of a service gateway")
	sgwMax := fs.Int("sgw-max-services-per-update", 0, "most serviceRequests one updateServices may hold; a longer one is refused whole (0: no maximum, as NRP documents none)")
	var dpNet networkFlags
	dpNet.register(fs)
	var features featureFlags
	fs.Var(&features, "feature", "a subscription feature registered, e.g. "+emulator.FeatureConnectionDraining+" (which a backend pool's drainPeriodInSeconds needs); repeatable")
	showVersion := fs.Bool("version", false, "print the version and exit")
	var id identityFlags
	id.register(fs)
	var sec securityFlags
	sec.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.String("azlb-emulator"))
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "azlb-emulator: unexpected argument %q (subcommands: replay)\n", fs.Arg(0))
		return 2
	}
	limits, err := throttle.options(fs)
	if err != nil {
		fmt.Fprintf(stderr, "azlb-emulator: %v\n", err)
		return 2
	}
	internet, err := sec.internetPrefixes()
	if err != nil {
		fmt.Fprintf(stderr, "azlb-emulator: %v\n", err)
		return 2
	}
	network, err := dpNet.network(*dataPlane)
	if err != nil {
		fmt.Fprintf(stderr, "azlb-emulator: %v\n", err)
		return 2
	}
	if err := id.resolve(); err != nil {
		fmt.Fprintf(stderr, "azlb-emulator: %v\n", err)
		return 2
	}
	srv, err := emulator.Start(emulator.Options{
		InternetPrefixes: internet, ServiceTags: sec.tags, Features: features,
		Latency: *latency, OperationDuration: *opDur,
		Throttle: limits.Throttle, WriteBudget: limits.WriteBudget, WriteBudgetWindow: limits.WriteBudgetWindow,
		PublicIPv4CIDR: *v4, PublicIPv6CIDR: *v6, DataPlane: *dataPlane, DataPlaneLogger: klog.Background().WithName("dataplane"),
		DataPlaneNetwork:         network,
		ServiceGatewayPOSTStatus: *sgwPost, ServiceGatewayPageSize: *sgwPage, ServiceGatewayMaxServicesPerUpdate: *sgwMax,
		TenantID: id.tenant, ClientID: id.client, ClientSecret: id.secret, ClientCertificates: id.certs, Tenants: id.tenants,
	}, *listen, *plain)
	if err != nil {
		fmt.Fprintf(stderr, "azlb-emulator: %v\n", err)
		return 1
	}
	ca := "none (plain HTTP)"
	if !*plain {
		if err := os.WriteFile(*caFile, srv.CACertPEM(), 0o644); err != nil {
			_ = srv.Close()
			fmt.Fprintf(stderr, "azlb-emulator: writing --ca-file: %v\n", err)
			return 1
		}
		ca = *caFile
	}
	fmt.Fprintf(stdout, "azlb-emulator serving ARM and AAD on %s (CA certificate: %s; tenant %s, client %s)\n", srv.URL(), ca, id.tenant, id.client)
	if *dataPlane {
		fmt.Fprintln(stdout, "azlb-emulator data plane on: load balancers on loopback carry traffic where network security groups allow it (Standard SKU is closed by default); GET /_emulator/dataplane shows what is served")
	}
	if network != nil {
		fmt.Fprintf(stdout, "azlb-emulator data plane network: %s served in network namespace %s\n", dpNet.prefixes, network.NetNS)
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "azlb-emulator: shutdown: %v\n", err)
		return 1
	}
	return 0
}

func runReplay(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("azlb-emulator replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("emulator", "", "base URL of a running emulator; empty starts one in-process per cassette")
	caFile := fs.String("ca-file", "", "CA certificate (PEM) to trust for --emulator")
	reset := fs.Bool("reset", false, "POST /_emulator/reset on --emulator before each cassette")
	verbose := fs.Bool("v", true, "print every interaction (false: failures only)")
	var id identityFlags
	id.register(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: azlb-emulator replay [--emulator URL --ca-file F] [--reset] CASSETTE...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if err := id.resolve(); err != nil {
		fmt.Fprintf(stderr, "azlb-emulator replay: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	failed := 0
	total := 0
	for _, path := range fs.Args() {
		c, err := replay.Load(path)
		if err != nil {
			fmt.Fprintf(stderr, "azlb-emulator replay: %v\n", err)
			return 1
		}
		tgt, cleanup, err := replayTarget(*target, *caFile, id)
		if err != nil {
			fmt.Fprintf(stderr, "azlb-emulator replay: %v\n", err)
			return 1
		}
		if *target != "" && *reset {
			if err := resetEmulator(ctx, tgt); err != nil {
				cleanup()
				fmt.Fprintf(stderr, "azlb-emulator replay: %v\n", err)
				return 1
			}
		}
		results, err := replay.Run(ctx, c, tgt, replay.OptionsFor(filepath.Base(path)))
		cleanup()
		for _, r := range results {
			total++
			if !r.Passed() {
				failed++
			}
			if *verbose || !r.Passed() {
				fmt.Fprintln(stdout, r.String())
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "azlb-emulator replay: %s: %v\n", c.Name, err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "%d interactions, %d passed, %d failed\n", total, total-failed, failed)
	if failed > 0 {
		return 1
	}
	return 0
}

// replayTarget connects to url (trusting caFile) or starts an in-process
// emulator when url is empty.
func replayTarget(url, caFile string, id identityFlags) (replay.Target, func(), error) {
	tgt := replay.Target{TenantID: id.tenant, ClientID: id.client, ClientSecret: id.secret}
	var tr *http.Transport
	var stopSrv func()
	if url == "" {
		srv, err := emulator.Start(emulator.Options{TenantID: id.tenant, ClientID: id.client, ClientSecret: id.secret}, "", false)
		if err != nil {
			return tgt, nil, err
		}
		stopSrv = func() { _ = srv.Close() }
		url = srv.URL()
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(srv.CACertPEM())
		tr = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	} else {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if caFile != "" {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return tgt, nil, fmt.Errorf("reading --ca-file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return tgt, nil, fmt.Errorf("--ca-file %s holds no PEM certificate", caFile)
			}
			cfg.RootCAs = pool
		}
		tr = &http.Transport{TLSClientConfig: cfg}
	}
	tgt.BaseURL = url
	tgt.Client = &http.Client{Transport: tr, Timeout: time.Minute}
	return tgt, func() {
		tr.CloseIdleConnections()
		if stopSrv != nil {
			stopSrv()
		}
	}, nil
}

func resetEmulator(ctx context.Context, tgt replay.Target) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tgt.BaseURL+"/_emulator/reset", nil)
	if err != nil {
		return err
	}
	resp, err := tgt.Client.Do(req)
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("reset answered %d", resp.StatusCode)
	}
	return nil
}

// featureFlags collects --feature values.
type featureFlags []string

func (f *featureFlags) String() string { return strings.Join(*f, ",") }

func (f *featureFlags) Set(v string) error {
	if strings.Count(v, "/") != 1 || strings.TrimSpace(v) != v || v == "/" {
		return fmt.Errorf("%q is not a feature name (<namespace>/<feature>, e.g. %s)", v, emulator.FeatureConnectionDraining)
	}
	*f = append(*f, v)
	return nil
}
