package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// MaxConfigSize is the largest configuration Load accepts, in bytes.
const MaxConfigSize = 4 << 20

// ErrEmpty is returned (wrapped) by Load for input that holds no
// configuration: nothing, only white space or comments, or a null document.
var ErrEmpty = errors.New("empty configuration")

var (
	configType = reflect.TypeFor[Config]()
	utf8BOM    = []byte{0xEF, 0xBB, 0xBF}
)

// LoadFile reads and loads the configuration file at path; see Load.
func LoadFile(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load configuration: %w", err)
	}
	defer func() { _ = f.Close() }()
	c, err := Load(f)
	if err != nil {
		return nil, fmt.Errorf("load configuration %s: %w", path, err)
	}
	return c, nil
}

// Load parses an azure.json document, applies SetDefaults and runs Validate.
//
// The document may be JSON or YAML. Field names are matched like
// encoding/json matches them: exactly, else case-insensitively, so the
// legacy spelling cloudProviderRatelimit sets CloudProviderRateLimit.
// Numbers and booleans given for string fields are read as strings.
//
// Keys that match no field are not an error: they are returned by
// (*Config).UnknownFields as JSON paths so the caller can log them.
//
// Only the first document of a multi-document YAML stream is read.
//
// On error Load returns a nil Config. Errors name the JSON field path and
// the rule broken; all type and validation problems are reported together
// (errors.Join of *FieldError), never the value of a secret. In the rare
// case that a secret had to be scrubbed from the text, the error is a plain
// error holding the scrubbed text only.
func Load(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	if len(data) > MaxConfigSize {
		return nil, fmt.Errorf("configuration is larger than %d bytes", MaxConfigSize)
	}
	c, err := load(data)
	if err != nil {
		secrets := secretCandidates(data)
		if c != nil {
			secrets = append(secrets, c.secretValues()...)
		}
		return nil, scrubError(err, secrets)
	}
	return c, nil
}

// load does the work of Load. On a validation error it returns the decoded
// Config too, so that Load can scrub its secret from the error text.
func load(data []byte) (*Config, error) {
	doc, err := parseDocument(data)
	if err != nil {
		return nil, err
	}
	return doc.load()
}

// document is an azure.json parsed and type-checked: its tree with the
// canonical field names, and the keys that match no field.
type document struct {
	tree    map[string]any
	unknown []string
	hints   map[string]string
	// warnings are further lines for UnknownFieldWarnings.
	warnings []string
}

// parseDocument parses and type-checks one azure.json document.
func parseDocument(data []byte) (*document, error) {
	data = bytes.TrimSpace(bytes.TrimPrefix(data, utf8BOM))
	if len(data) == 0 {
		return nil, ErrEmpty
	}
	root, err := parseTree(data)
	if err != nil {
		return nil, err
	}
	if root == nil {
		return nil, ErrEmpty
	}
	obj, ok := root.(map[string]any)
	if !ok {
		return nil, errors.New("configuration must be an object (a JSON object or YAML mapping), not a list or a single value")
	}
	var chk checker
	normalised := chk.object(obj, configType, "")
	if len(chk.errs) > 0 {
		return nil, errors.Join(chk.errs...)
	}
	return &document{tree: normalised, unknown: chk.unknown, hints: chk.hints}, nil
}

// load decodes the document into a Config, applies the defaults and
// validates it; see load.
func (doc *document) load() (*Config, error) {
	buf, err := json.Marshal(doc.tree)
	if err != nil {
		return nil, fmt.Errorf("decode configuration: %s", sanitize(err.Error()))
	}
	c := new(Config)
	if err := json.Unmarshal(buf, c); err != nil {
		return nil, decodeError(err)
	}
	if len(doc.unknown) > 0 {
		c.unknownFields = slices.Clone(doc.unknown)
		slices.Sort(c.unknownFields)
		c.unknownHints = doc.hints
	}
	c.extraWarnings = doc.warnings
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		if len(c.unknownFields) > 0 {
			// A misspelt key is a likely cause of a "required" error.
			err = errors.Join(err, fmt.Errorf("note: unknown fields were ignored: %s", strings.Join(c.unknownFields, ", ")))
		}
		return c, err
	}
	return c, nil
}

// parseTree decodes data into a generic tree (objects, lists, strings,
// json.Number, booleans, nil). Valid JSON is decoded by encoding/json; any
// other input is converted from YAML by sigs.k8s.io/yaml first.
func parseTree(data []byte) (any, error) {
	if json.Valid(data) {
		return decodeJSONTree(data)
	}
	j, yerr := yaml.YAMLToJSON(data)
	if yerr != nil {
		if data[0] == '{' || data[0] == '[' {
			// Meant as JSON: the JSON error is the useful one.
			return nil, jsonSyntaxError(data)
		}
		return nil, fmt.Errorf("parse configuration: %s", sanitize(yerr.Error()))
	}
	return decodeJSONTree(j)
}

func decodeJSONTree(j []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("parse configuration: %s", sanitize(err.Error()))
	}
	return root, nil
}

// jsonSyntaxError reports where invalid JSON breaks, as line and column.
func jsonSyntaxError(data []byte) error {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineCol(data, se.Offset)
		return fmt.Errorf("parse configuration: line %d, column %d: %s", line, col, sanitize(se.Error()))
	}
	if err == nil {
		err = errors.New("invalid JSON")
	}
	return fmt.Errorf("parse configuration: %s", sanitize(err.Error()))
}

// lineCol converts a byte offset (as reported by encoding/json: the number
// of bytes read when the error was found) to a 1-based line and column.
func lineCol(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	if offset < 1 {
		offset = 1
	}
	before := data[:offset-1]
	line = bytes.Count(before, []byte("\n")) + 1
	col = len(before) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// decodeError turns an encoding/json error that slipped past the checker into
// a field error; it does not include the offending value.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return &FieldError{Field: te.Field, Rule: "must be of type " + te.Type.String()}
	}
	return fmt.Errorf("decode configuration: %s", sanitize(err.Error()))
}

// UnknownFields returns the JSON paths of the keys Load ignored because they
// match no field (for example "vmType" or
// "multipleStandardLoadBalancerConfigurations[0].autoPlaceServices"),
// sorted. It is nil for a Config that was not produced by Load.
func (c *Config) UnknownFields() []string {
	if c == nil {
		return nil
	}
	return slices.Clone(c.unknownFields)
}

// UnknownFieldWarnings is UnknownFields for a person: one line per ignored
// field, naming the field it is likely a misspelling of when one is close
// (for example "enableLoadBalancerAdminStat: not a field azlb reads, ignored;
// did you mean enableLoadBalancerAdminState?"). The controller logs them at
// start; azlb status and azlb verify print them.
func (c *Config) UnknownFieldWarnings() []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.unknownFields)+len(c.extraWarnings))
	for _, f := range c.unknownFields {
		line := f + ": not a field azlb reads, ignored"
		if near, ok := c.unknownHints[f]; ok {
			line += "; did you mean " + near + "?"
		}
		out = append(out, line)
	}
	if _, dropped, err := ParseTags(c.Tags); err == nil && len(dropped) > 0 {
		out = append(out, "tags: "+DroppedTags(dropped))
	}
	return append(out, c.extraWarnings...)
}
