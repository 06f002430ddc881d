package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Target is the ARM endpoint to replay against.
type Target struct {
	// BaseURL is the scheme and host, e.g. https://127.0.0.1:8443.
	BaseURL string
	// Client sends the requests (it must trust the target's CA).
	Client *http.Client
	// TenantID, ClientID and ClientSecret obtain a token from
	// {BaseURL}/{TenantID}/oauth2/v2.0/token.
	TenantID, ClientID, ClientSecret string
}

// Options tunes a replay.
type Options struct {
	// Ignore lists, per interaction id, JSON key paths not compared (for
	// recordings that captured environment-specific members).
	Ignore map[int][]string
	// IgnoreHeaders lists, per interaction id, response headers whose
	// presence is not compared (canonical names, e.g. "Etag").
	IgnoreHeaders map[int][]string
	// NoSeed disables seeding of pre-existing resources.
	NoSeed bool
}

// Result is the outcome of one interaction.
type Result struct {
	Cassette   string
	ID         int
	Method     string
	URL        string // the URL actually requested
	WantStatus int
	GotStatus  int
	Seeded     bool     // a seed request was sent first
	Problems   []string // empty when the interaction passed
}

// Passed reports whether the interaction matched the recording.
func (r Result) Passed() bool { return len(r.Problems) == 0 }

func (r Result) String() string {
	verdict := "PASS"
	if !r.Passed() {
		verdict = "FAIL"
	}
	s := fmt.Sprintf("%s %s #%d %s %s -> %d (recorded %d)", verdict, r.Cassette, r.ID, r.Method, r.URL, r.GotStatus, r.WantStatus)
	if r.Seeded {
		s += " [seeded]"
	}
	for _, p := range r.Problems {
		s += "\n    " + p
	}
	return s
}

// zeroEtag matches the recorder's zeroed etags.
var zeroEtag = regexp.MustCompile(`^(W/)?"?0{8}-0{4}-0{4}-0{4}-0{12}"?$`)

// opPath matches operation-status paths.
var opPath = regexp.MustCompile(`(?i)/(operations|operationresults)/[^/]+$`)

type runner struct {
	tgt       Target
	opts      Options
	token     string
	lastAsync string
	lastLoc   string
	etags     map[string]string // lower(resource path) -> etag
	created   map[string]bool   // lower(resource path) created or seen in this replay
	cassette  string
}

// Run replays c against tgt. An error means the target could not be
// reached or authenticated against; mismatches are reported in the results.
func Run(ctx context.Context, c *Cassette, tgt Target, opts Options) ([]Result, error) {
	r := &runner{tgt: tgt, opts: opts, etags: map[string]string{}, created: map[string]bool{}, cassette: c.Name}
	tok, err := r.fetchToken(ctx)
	if err != nil {
		return nil, err
	}
	r.token = tok
	var out []Result
	for _, it := range c.Interactions {
		res, err := r.replayOne(ctx, it)
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

func (r *runner) fetchToken(ctx context.Context) (string, error) {
	form := url.Values{
		"grant_type":    {"client_credentials"},
		"client_id":     {r.tgt.ClientID},
		"client_secret": {r.tgt.ClientSecret},
		"scope":         {"https://management.azure.com/.default"},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.tgt.BaseURL+"/"+r.tgt.TenantID+"/oauth2/v2.0/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := r.tgt.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("replay: token request: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("replay: token request answered %d: %.300s", resp.StatusCode, b)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(b, &tr); err != nil || tr.AccessToken == "" {
		return "", fmt.Errorf("replay: token response has no access_token")
	}
	return tr.AccessToken, nil
}

// resourceKey is the lower-cased path of the resource a URL names.
func resourceKey(u *url.URL) string { return strings.ToLower(strings.TrimSuffix(u.Path, "/")) }

func (r *runner) replayOne(ctx context.Context, it Interaction) (Result, error) {
	res := Result{Cassette: r.cassette, ID: it.ID, Method: it.Request.Method, WantStatus: it.Response.Code}
	rec, err := url.Parse(it.Request.URL)
	if err != nil {
		res.Problems = append(res.Problems, "recorded URL does not parse: "+err.Error())
		return res, nil
	}
	target := r.tgt.BaseURL + rec.RequestURI()
	if opPath.MatchString(rec.Path) {
		isResult := strings.Contains(strings.ToLower(rec.Path), "/operationresults/")
		switch {
		case isResult && r.lastLoc != "":
			target = r.lastLoc
		case !isResult && r.lastAsync != "":
			target = r.lastAsync
		case r.lastLoc != "":
			target = r.lastLoc
		default:
			res.URL = target
			res.Problems = append(res.Problems, "the target returned no polling URL before this operation poll")
			return res, nil
		}
	}
	res.URL = target
	key := resourceKey(rec)

	hdr := http.Header{}
	if v := it.Request.Header.Get("If-Match"); v != "" {
		if zeroEtag.MatchString(v) {
			if cur, ok := r.etags[key]; ok {
				v = cur
			}
		}
		hdr.Set("If-Match", v)
	}
	if v := it.Request.Header.Get("If-None-Match"); v != "" {
		hdr.Set("If-None-Match", v)
	}

	// A recorded update of something this replay never created: the
	// recording started from pre-existing state, so create it first.
	if !r.opts.NoSeed && it.Request.Method == http.MethodPut && it.Response.Code == http.StatusOK && !r.created[key] {
		resp, _, err := r.send(ctx, http.MethodPut, target, it.Request.Body, nil)
		if err != nil {
			return res, err
		}
		if resp.StatusCode >= 300 {
			res.Problems = append(res.Problems, fmt.Sprintf("seeding the pre-existing resource failed with %d", resp.StatusCode))
			return res, nil
		}
		res.Seeded = true
		r.learn(key, resp, nil)
	}

	resp, body, err := r.send(ctx, it.Request.Method, target, it.Request.Body, hdr)
	if err != nil {
		return res, err
	}
	res.GotStatus = resp.StatusCode
	r.learn(key, resp, body)
	if it.Request.Method == http.MethodPut && resp.StatusCode < 300 {
		r.created[key] = true
	}
	if it.Request.Method == http.MethodDelete && resp.StatusCode < 300 {
		delete(r.created, key)
	}

	if resp.StatusCode != it.Response.Code {
		res.Problems = append(res.Problems, fmt.Sprintf("status %d, recorded %d; body %.300s", resp.StatusCode, it.Response.Code, body))
		return res, nil
	}
	res.Problems = append(res.Problems, CompareKeys([]byte(it.Response.Body), body, r.opts.Ignore[it.ID])...)
	for _, h := range []string{"Azure-Asyncoperation", "Location"} {
		want, got := it.Response.Header.Get(h) != "", resp.Header.Get(h) != ""
		if want != got {
			res.Problems = append(res.Problems, fmt.Sprintf("header %s present=%v, recorded present=%v", h, got, want))
		}
	}
	if it.Request.Method == http.MethodGet && it.Response.Code == http.StatusOK && !slices.Contains(r.opts.IgnoreHeaders[it.ID], "Etag") {
		want, got := it.Response.Header.Get("Etag") != "", resp.Header.Get("Etag") != ""
		if want != got {
			res.Problems = append(res.Problems, fmt.Sprintf("header ETag present=%v, recorded present=%v", got, want))
		}
	}
	return res, nil
}

// learn records polling URLs and etags from a response. Relative polling
// URLs are resolved against the request URL.
func (r *runner) learn(key string, resp *http.Response, body []byte) {
	if v := resp.Header.Get("Azure-Asyncoperation"); v != "" {
		r.lastAsync = resolve(resp.Request.URL, v)
	}
	if v := resp.Header.Get("Location"); v != "" {
		r.lastLoc = resolve(resp.Request.URL, v)
	}
	if resp.StatusCode >= 300 {
		return
	}
	etag := resp.Header.Get("Etag")
	if etag == "" && len(body) > 0 {
		var m struct {
			Etag string `json:"etag"`
		}
		if json.Unmarshal(body, &m) == nil {
			etag = m.Etag
		}
	}
	if etag != "" {
		r.etags[key] = etag
	}
}

func resolve(base *url.URL, ref string) string {
	u, err := url.Parse(ref)
	if err != nil || base == nil {
		return ref
	}
	return base.ResolveReference(u).String()
}

func (r *runner) send(ctx context.Context, method, target, body string, hdr http.Header) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, nil, fmt.Errorf("replay: build request: %w", err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.tgt.Client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("replay: %s %s: %w", method, target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("replay: reading %s %s: %w", method, target, err)
	}
	return resp, bytes.TrimSpace(b), nil
}
