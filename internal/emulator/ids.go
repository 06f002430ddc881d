package emulator

import (
	crand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"sync"
)

// idSource produces random version-4 UUID strings. It is seeded from
// crypto/rand once and then uses a ChaCha8 stream: identifiers must be
// unique, not secret.
type idSource struct {
	mu  sync.Mutex
	rng *rand.ChaCha8
}

func newIDSource() *idSource {
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // crypto/rand.Read never fails on supported platforms
	return &idSource{rng: rand.NewChaCha8(seed)}
}

// uuid returns a new random UUID in canonical lower-case form.
func (s *idSource) uuid() string {
	var b [16]byte
	s.mu.Lock()
	_, _ = s.rng.Read(b[:])
	s.mu.Unlock()
	b[6] = (b[6] & 0x0f) | 0x40
	b[8] = (b[8] & 0x3f) | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}

// etag returns a new weak etag in NRP's format: W/"<uuid>".
func (s *idSource) etag() string {
	return `W/"` + s.uuid() + `"`
}

// float returns a pseudo-random float in [0,1).
func (s *idSource) float() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return float64(s.rng.Uint64()>>11) / (1 << 53)
}
