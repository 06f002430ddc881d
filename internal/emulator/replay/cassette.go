package replay

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Cassette is a go-vcr v2 recording.
type Cassette struct {
	Name         string
	Interactions []Interaction
}

// Interaction is one recorded request and response.
type Interaction struct {
	ID       int
	Request  Request
	Response Response
}

// Request is a recorded request.
type Request struct {
	Method string
	URL    string
	Body   string
	Header http.Header
}

// Response is a recorded response.
type Response struct {
	Code   int
	Body   string
	Header http.Header
}

type vcrFile struct {
	Version      int `json:"version"`
	Interactions []struct {
		ID      int `json:"id"`
		Request struct {
			Body    string              `json:"body"`
			Headers map[string][]string `json:"headers"`
			URL     string              `json:"url"`
			Method  string              `json:"method"`
		} `json:"request"`
		Response struct {
			Body    string              `json:"body"`
			Headers map[string][]string `json:"headers"`
			Code    int                 `json:"code"`
		} `json:"response"`
	} `json:"interactions"`
}

// Load reads a go-vcr v2 cassette.
func Load(path string) (*Cassette, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("replay: read cassette: %w", err)
	}
	return Parse(filepath.Base(path), b)
}

// Parse decodes cassette YAML.
func Parse(name string, data []byte) (*Cassette, error) {
	var f vcrFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("replay: cassette %s: %w", name, err)
	}
	if f.Version != 2 {
		return nil, fmt.Errorf("replay: cassette %s: version %d, want go-vcr version 2", name, f.Version)
	}
	c := &Cassette{Name: name}
	for i, it := range f.Interactions {
		if it.Request.Method == "" || it.Request.URL == "" || it.Response.Code == 0 {
			return nil, fmt.Errorf("replay: cassette %s: interaction %d lacks method, url or response code", name, i)
		}
		c.Interactions = append(c.Interactions, Interaction{
			ID: it.ID,
			Request: Request{Method: strings.ToUpper(it.Request.Method), URL: it.Request.URL, Body: it.Request.Body,
				Header: canonical(it.Request.Headers)},
			Response: Response{Code: it.Response.Code, Body: it.Response.Body, Header: canonical(it.Response.Headers)},
		})
	}
	return c, nil
}

func canonical(m map[string][]string) http.Header {
	h := http.Header{}
	for k, v := range m {
		for _, x := range v {
			h.Add(k, x)
		}
	}
	return h
}
