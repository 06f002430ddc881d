package dataplane

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// flow is one established TCP flow: the client's connection to the
// frontend and the data plane's connection to the member.
type flow struct {
	rs      *ruleState
	member  netip.Addr
	stats   *memberStats
	client  *net.TCPConn
	backend *net.TCPConn

	last    atomic.Int64 // clock time of the last byte relayed (UnixNano)
	dropped atomic.Bool  // idle timeout without TCP reset: nothing is relayed any more
	// drainAt is when a flow whose member left the pool is reset (zero:
	// not draining). Guarded by rs.mu.
	drainAt time.Time

	resetOnce sync.Once
}

// relay copies both ways until both directions end, then closes both
// connections and forgets the flow. It blocks.
func (f *flow) relay(now func() time.Time) {
	var wg sync.WaitGroup
	wg.Go(func() { f.pipe(f.backend, f.client, now, &f.rs.counters.bytesIn) })
	wg.Go(func() { f.pipe(f.client, f.backend, now, &f.rs.counters.bytesOut) })
	wg.Wait()
	_ = f.client.Close()
	_ = f.backend.Close()
	f.rs.forget(f)
}

// pipe copies src to dst. At the end of src it half-closes dst (a FIN
// travels on); when src was reset, or dst cannot be written, it resets
// both ends, as a reset travels through a load balancer.
func (f *flow) pipe(dst, src *net.TCPConn, now func() time.Time, bytes *atomic.Uint64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if f.dropped.Load() {
				continue // a silently dropped flow: the bytes go nowhere
			}
			f.last.Store(now().UnixNano())
			bytes.Add(uint64(n))
			if _, werr := dst.Write(buf[:n]); werr != nil {
				f.reset()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && !f.dropped.Load() {
				_ = dst.CloseWrite()
				return
			}
			if errors.Is(err, io.EOF) {
				return
			}
			f.reset()
			return
		}
	}
}

// reset sends a TCP reset to both ends and closes them.
func (f *flow) reset() {
	f.resetOnce.Do(func() {
		for _, c := range []*net.TCPConn{f.client, f.backend} {
			_ = c.SetLinger(0)
			_ = c.Close()
		}
	})
}

// resetConn resets a connection that never became a flow.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
