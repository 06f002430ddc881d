package emulator

import (
	"sync"
	"time"
)

// RequestRecord is one ARM or AAD request as the emulator saw it.
type RequestRecord struct {
	Time     time.Time     `json:"time"`
	Method   string        `json:"method"`
	Path     string        `json:"path"`
	Query    string        `json:"query,omitempty"`
	Status   int           `json:"status"`
	Duration time.Duration `json:"duration"`
	Kind     string        `json:"kind"` // "arm", "aad" or "imds"
	Faulted  bool          `json:"faulted,omitempty"`
	// UserAgent is the request's User-Agent header: azlb starts it with
	// azure.json's userAgent, which tells replicas apart.
	UserAgent string `json:"userAgent,omitempty"`
	// Body is the request body of updateServices and updateAddressLocations
	// POSTs (other requests' bodies are not kept).
	Body string `json:"body,omitempty"`
}

// maxRequestRecords bounds the request log; the oldest records are dropped
// beyond it.
const maxRequestRecords = 200000

type requestLog struct {
	mu      sync.Mutex
	records []RequestRecord
}

func (l *requestLog) add(r RequestRecord) {
	l.mu.Lock()
	if len(l.records) >= maxRequestRecords {
		n := copy(l.records, l.records[len(l.records)/4:])
		l.records = l.records[:n]
	}
	l.records = append(l.records, r)
	l.mu.Unlock()
}

func (l *requestLog) snapshot(since time.Time) []RequestRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]RequestRecord, 0, len(l.records))
	for _, r := range l.records {
		if !since.IsZero() && r.Time.Before(since) {
			continue
		}
		out = append(out, r)
	}
	return out
}

func (l *requestLog) reset() {
	l.mu.Lock()
	l.records = nil
	l.mu.Unlock()
}
