package emulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// jsonDuration accepts a Go duration string ("25ms", "1.5s") or a number of
// milliseconds, and encodes as a duration string.
type jsonDuration time.Duration

func (d *jsonDuration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a Go duration such as \"25ms\"", s)
		}
		*d = jsonDuration(v)
		return nil
	}
	ms, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("%s is neither a duration string nor a number of milliseconds", b)
	}
	*d = jsonDuration(time.Duration(ms * float64(time.Millisecond)))
	return nil
}

func (d jsonDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// faultWire is the control API's JSON form of a Fault.
type faultWire struct {
	Method          string       `json:"method,omitempty"`
	PathRegex       string       `json:"pathRegex,omitempty"`
	Count           int          `json:"count,omitempty"`
	Probability     float64      `json:"probability,omitempty"`
	Status          int          `json:"status,omitempty"`
	Code            string       `json:"code,omitempty"`
	Message         string       `json:"message,omitempty"`
	RetryAfter      string       `json:"retryAfter,omitempty"`
	Latency         jsonDuration `json:"latency,omitempty"`
	ResetConnection bool         `json:"resetConnection,omitempty"`
	LROResult       string       `json:"lroResult,omitempty"`
}

func (w faultWire) fault() Fault {
	return Fault{Method: w.Method, PathRegex: w.PathRegex, Count: w.Count, Probability: w.Probability,
		Status: w.Status, Code: w.Code, Message: w.Message, RetryAfter: w.RetryAfter,
		Latency: time.Duration(w.Latency), ResetConnection: w.ResetConnection, LROResult: w.LROResult}
}

func wireOf(f Fault) faultWire {
	return faultWire{Method: f.Method, PathRegex: f.PathRegex, Count: f.Count, Probability: f.Probability,
		Status: f.Status, Code: f.Code, Message: f.Message, RetryAfter: f.RetryAfter,
		Latency: jsonDuration(f.Latency), ResetConnection: f.ResetConnection, LROResult: f.LROResult}
}

// controlError is the body of a rejected control request.
func controlError(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(mustMarshal(obj{"error": obj{"code": "BadControlRequest", "message": fmt.Sprintf(format, args...)}}))
}

func controlJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		controlError(w, http.StatusInternalServerError, "encoding the response failed: %v", err)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// decodeStrict decodes a JSON body rejecting unknown fields; the error
// names the offending field.
func decodeStrict(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the body: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("field %q: expected %s", te.Field, te.Type)
		}
		return err
	}
	return nil
}

// serveControl implements the /_emulator/ control API.
func (e *Emulator) serveControl(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/_emulator"), "/")
	switch {
	case p == "/healthz" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	case p == "/faults" && r.Method == http.MethodPost:
		var fw faultWire
		if err := decodeStrict(r, &fw); err != nil {
			controlError(w, http.StatusBadRequest, "invalid fault: %v", err)
			return
		}
		id, err := e.AddFault(fw.fault())
		if err != nil {
			controlError(w, http.StatusBadRequest, "%v", err)
			return
		}
		controlJSON(w, http.StatusCreated, obj{"id": id})
	case p == "/faults" && r.Method == http.MethodGet:
		list := e.faults.list()
		out := make([]any, 0, len(list))
		for _, f := range list {
			out = append(out, obj{"id": f.ID, "fault": wireOf(f.Fault), "fired": f.Fired})
		}
		controlJSON(w, http.StatusOK, out)
	case p == "/faults" && r.Method == http.MethodDelete:
		e.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	case strings.HasPrefix(p, "/faults/") && r.Method == http.MethodDelete:
		id := strings.TrimPrefix(p, "/faults/")
		if !e.faults.remove(id) {
			controlError(w, http.StatusNotFound, "fault id %q is not installed", id)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case p == "/latency" && r.Method == http.MethodPut:
		var body struct {
			Latency *jsonDuration `json:"latency"`
		}
		if err := decodeStrict(r, &body); err != nil {
			controlError(w, http.StatusBadRequest, "invalid latency request: %v", err)
			return
		}
		if body.Latency == nil {
			controlError(w, http.StatusBadRequest, "field \"latency\" is required (a duration such as \"25ms\" or milliseconds)")
			return
		}
		if *body.Latency < 0 {
			controlError(w, http.StatusBadRequest, "field \"latency\" must not be negative")
			return
		}
		e.SetLatency(time.Duration(*body.Latency))
		controlJSON(w, http.StatusOK, obj{"latency": *body.Latency})
	case p == "/latency" && r.Method == http.MethodGet:
		controlJSON(w, http.StatusOK, obj{"latency": jsonDuration(e.latency.Load())})
	case p == "/requests" && r.Method == http.MethodGet:
		var since time.Time
		if s := r.URL.Query().Get("since"); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				controlError(w, http.StatusBadRequest, "query parameter \"since\" must be an RFC 3339 time: %v", err)
				return
			}
			since = t
		}
		controlJSON(w, http.StatusOK, e.log.snapshot(since))
	case p == "/requests" && r.Method == http.MethodDelete:
		e.ResetRequests()
		w.WriteHeader(http.StatusNoContent)
	case p == "/state" && r.Method == http.MethodGet:
		b, err := e.Dump()
		if err != nil {
			controlError(w, http.StatusInternalServerError, "dump failed: %v", err)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(b)
	case p == "/dataplane" && r.Method == http.MethodGet:
		st, ok := e.DataPlaneStatus()
		if !ok {
			controlError(w, http.StatusNotFound, "the data plane is off (start the emulator with --data-plane)")
			return
		}
		controlJSON(w, http.StatusOK, st)
	case p == "/egress":
		e.serveEgressControl(w, r)
	case p == "/servicegateway" && r.Method == http.MethodPut:
		var body struct {
			PostStatus *int `json:"postStatus"`
			PageSize   *int `json:"pageSize"`
		}
		if err := decodeStrict(r, &body); err != nil {
			controlError(w, http.StatusBadRequest, "invalid service gateway settings: %v", err)
			return
		}
		// Both fields are checked before either is applied.
		opts := Options{ServiceGatewayPOSTStatus: int(e.sgwPostStatus.Load()), ServiceGatewayPageSize: int(e.sgwPageSize.Load())}
		if body.PostStatus != nil {
			opts.ServiceGatewayPOSTStatus = *body.PostStatus
		}
		if body.PageSize != nil {
			opts.ServiceGatewayPageSize = *body.PageSize
		}
		if err := opts.validateServiceGateway(); err != nil {
			controlError(w, http.StatusBadRequest, "%v", err)
			return
		}
		e.sgwPostStatus.Store(int32(opts.ServiceGatewayPOSTStatus))
		e.sgwPageSize.Store(int32(opts.ServiceGatewayPageSize))
		fallthrough
	case p == "/servicegateway" && r.Method == http.MethodGet:
		controlJSON(w, http.StatusOK, obj{"postStatus": int(e.sgwPostStatus.Load()), "pageSize": int(e.sgwPageSize.Load())})
	case p == "/reset" && r.Method == http.MethodPost:
		e.Reset()
		w.WriteHeader(http.StatusNoContent)
	default:
		controlError(w, http.StatusNotFound, "no control endpoint %s %s; see docs/emulator.md", r.Method, r.URL.Path)
	}
}
