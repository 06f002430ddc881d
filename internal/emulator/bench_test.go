package emulator

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/azlb/azlb/internal/testutil/cputime"
)

// benchClients is the number of concurrent clients the benchmarks use.
const benchClients = 64

// benchEnv is a TLS emulator with a load balancer holding one backend pool
// per client, and an HTTP/1.1 keep-alive client pool.
type benchEnv struct {
	env  *sdkEnv
	h1   *http.Client
	tok  string
	base string
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	env := newSDKEnv(b, Options{Throttle: NoThrottle})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(env.srv.CACertPEM())
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: benchClients,
		MaxConnsPerHost:     benchClients,
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1 keep-alive
	}
	b.Cleanup(tr.CloseIdleConnections)
	be := &benchEnv{env: env, h1: &http.Client{Transport: tr}, tok: env.token(b), base: env.srv.URL()}
	env.createGroup(b, "rg", "eastus")
	be.mustPut(b, netPath("rg", "virtualNetworks", "vnet"), `{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":["10.0.0.0/16"]}}}`)
	be.mustPut(b, netPath("rg", "publicIPAddresses", "pip"), `{"location":"eastus","sku":{"name":"Standard"}}`)
	var pools []string
	for i := 0; i < benchClients; i++ {
		pools = append(pools, fmt.Sprintf(`{"name":"pool-%d"}`, i))
	}
	be.mustPut(b, netPath("rg", "loadBalancers", "lb"), `{"location":"eastus","sku":{"name":"Standard"},"properties":{
		"frontendIPConfigurations":[{"name":"fe","properties":{"publicIPAddress":{"id":"`+netID("rg", "publicIPAddresses", "pip")+`"}}}],
		"backendAddressPools":[`+strings.Join(pools, ",")+`]}}`)
	return be
}

func (be *benchEnv) do(method, path, body string) (int, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, be.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+be.tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := be.h1.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

func (be *benchEnv) mustPut(b *testing.B, path, body string) {
	b.Helper()
	code, err := be.do(http.MethodPut, path, body)
	if err != nil || code >= 300 {
		b.Fatalf("PUT %s: %d %v", path, code, err)
	}
}

// poolBody is a backend pool with n IP-based addresses.
func poolBody(n, gen int) string {
	var sb strings.Builder
	sb.WriteString(`{"properties":{"loadBalancerBackendAddresses":[`)
	vnet := netID("rg", "virtualNetworks", "vnet")
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		state := "None"
		if (i+gen)%7 == 0 {
			state = "Down"
		}
		fmt.Fprintf(&sb, `{"name":"node-%d","properties":{"ipAddress":"10.0.%d.%d","virtualNetwork":{"id":%q},"adminState":%q}}`, i, i/250, i%250+4, vnet, state)
	}
	sb.WriteString(`]}}`)
	return sb.String()
}

// runParallel runs b.N requests over benchClients workers and reports
// throughput, client-side p99 and server-side (added) p99 latency. With
// rate > 0 the requests are paced (open loop): request i is due at
// start + i/rate, so latency is measured at that offered load rather than
// at saturation.
func runParallel(b *testing.B, be *benchEnv, want int, rate float64, req func(worker, i int) (string, string, string)) {
	var next atomic.Int64
	lat := make([][]time.Duration, benchClients)
	var failures atomic.Int64
	var firstErr atomic.Value
	be.env.emu.ResetRequests()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < benchClients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if rate > 0 {
					due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
					if d := time.Until(due); d > 0 {
						<-time.After(d)
					}
				}
				m, p, body := req(w, i)
				t0 := time.Now()
				code, err := be.do(m, p, body)
				lat[w] = append(lat[w], time.Since(t0))
				if err != nil || code != want {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%s %s: %d %v", m, p, code, err))
				}
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if f := failures.Load(); f > 0 {
		b.Fatalf("%d of %d requests failed; first: %v", f, b.N, firstErr.Load())
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	var server []time.Duration
	for _, r := range be.env.emu.Requests() {
		server = append(server, r.Duration)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(percentile(all, 0.50))/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(percentile(all, 0.99))/float64(time.Millisecond), "p99-ms")
	b.ReportMetric(float64(percentile(server, 0.99))/float64(time.Millisecond), "server-p99-ms")
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(float64(len(d)-1)*p)]
}

// BenchmarkGET measures GETs of a load balancer (64 pools) over TLS with
// keep-alive from 64 concurrent clients: "saturated" as fast as they can,
// "at-5000/s" paced at the target rate.
func BenchmarkGET(b *testing.B) {
	for _, tc := range []struct {
		name string
		rate float64
	}{{"saturated", 0}, {"at-5000/s", 5000}} {
		b.Run(tc.name, func(b *testing.B) {
			be := newBenchEnv(b)
			path := netPath("rg", "loadBalancers", "lb")
			runParallel(b, be, http.StatusOK, tc.rate, func(int, int) (string, string, string) { return http.MethodGet, path, "" })
		})
	}
}

// BenchmarkBackendPoolPUT measures backend pool subresource PUTs (20
// IP-based addresses each, one pool per client) over TLS with keep-alive
// from 64 concurrent clients: "saturated" and paced at the 1,000/s target.
func BenchmarkBackendPoolPUT(b *testing.B) {
	bodies := make([]string, 7)
	for i := range bodies {
		bodies[i] = poolBody(20, i)
	}
	paths := make([]string, benchClients)
	for w := range paths {
		paths[w] = strings.Replace(netPath("rg", "loadBalancers", "lb"), "?", fmt.Sprintf("/backendAddressPools/pool-%d?", w), 1)
	}
	for _, tc := range []struct {
		name string
		rate float64
	}{{"saturated", 0}, {"at-1000/s", 1000}} {
		b.Run(tc.name, func(b *testing.B) {
			be := newBenchEnv(b)
			runParallel(b, be, http.StatusOK, tc.rate, func(w, i int) (string, string, string) {
				return http.MethodPut, paths[w], bodies[i%len(bodies)]
			})
		})
	}
}

// BenchmarkPoolCutoverHandler measures the emulator's CPU for one admin-state
// cutover of a backend pool of n IP-based addresses, in process (no TLS, no
// latency): "put" is the pool PUT with one entry's adminState changed (parse,
// validate, store, answer), "get" the read that follows it.
//
//	go test -run '^$' -bench BenchmarkPoolCutoverHandler -benchmem ./internal/emulator/
func BenchmarkPoolCutoverHandler(b *testing.B) {
	for _, n := range []int{250, 1000} {
		h := seedHandlerWith(b, Options{Throttle: NoThrottle})
		path := strings.Replace(netPath("rg", "loadBalancers", "lb"), "?", "/backendAddressPools/pool?", 1)
		bodies := make([]string, 7)
		for i := range bodies {
			bodies[i] = poolBody(n, i)
		}
		b.Run(fmt.Sprintf("entries=%d/put", n), func(b *testing.B) {
			i := 0
			cpu := cputime.Start()
			for b.Loop() {
				if rec := h.do(b, http.MethodPut, path, bodies[i%len(bodies)], nil); rec.Code != http.StatusOK && rec.Code != http.StatusCreated {
					b.Fatalf("PUT: %d %s", rec.Code, rec.Body)
				}
				i++
			}
			cpu.Report(b)
		})
		b.Run(fmt.Sprintf("entries=%d/get", n), func(b *testing.B) {
			cpu := cputime.Start()
			for b.Loop() {
				if rec := h.do(b, http.MethodGet, path, "", nil); rec.Code != http.StatusOK {
					b.Fatalf("GET: %d %s", rec.Code, rec.Body)
				}
			}
			cpu.Report(b)
		})
	}
}
