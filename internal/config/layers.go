package config

import (
	"fmt"
	"slices"
)

// Cloud configuration types (cloudConfigType): whether the Secret
// kube-system/azure-cloud-provider (key cloud-config) overrides azure.json,
// as the Azure cloud provider reads it. internal/cloudconfig reads the
// Secret; this file merges the two documents.
const (
	// CloudConfigTypeFile: azure.json alone; the Secret is not read.
	CloudConfigTypeFile = "file"
	// CloudConfigTypeSecret: the Secret's document alone replaces
	// azure.json (which only says so); the Secret must exist.
	CloudConfigTypeSecret = "secret"
	// CloudConfigTypeMerge: the fields the Secret's document sets override
	// azure.json's; without the Secret (or its key) azure.json alone
	// applies. The default.
	CloudConfigTypeMerge = "merge"
	// DefaultCloudConfigType is the Azure cloud provider's default.
	DefaultCloudConfigType = CloudConfigTypeMerge
)

var knownCloudConfigTypes = []string{CloudConfigTypeFile, CloudConfigTypeSecret, CloudConfigTypeMerge}

// CloudConfigTypeOf reads cloudConfigType from an azure.json document
// (any case; unset means merge), so that the caller knows whether to read
// the Secret before it loads the configuration. A document that does not
// parse, or an unknown type, is an error naming the problem (never a
// secret: the same scrubbing as Load).
func CloudConfigTypeOf(data []byte) (string, error) {
	doc, err := parseDocument(limit(data))
	if err != nil {
		return "", scrubError(err, secretCandidates(data))
	}
	return doc.cloudConfigType()
}

func (doc *document) cloudConfigType() (string, error) {
	v, _ := doc.tree["cloudConfigType"].(string)
	if v == "" {
		return DefaultCloudConfigType, nil
	}
	if t := canonical(v, knownCloudConfigTypes); slices.Contains(knownCloudConfigTypes, t) {
		return t, nil
	}
	return "", &FieldError{Field: "cloudConfigType", Rule: fmt.Sprintf("%s; got %q", oneOf(knownCloudConfigTypes), v)}
}

func limit(data []byte) []byte {
	if len(data) > MaxConfigSize {
		return data[:MaxConfigSize]
	}
	return data
}

// LoadOverridden loads azure.json (file) with the document of the Secret
// (secret), as file's cloudConfigType says:
//
//   - file: file alone; secret is not looked at (nor parsed).
//   - merge: the secret's fields override file's: a key present in the
//     secret wins; an object (a rate-limit stanza, tagsMap, ...) present in
//     both is merged key by key the same way; a list is replaced whole; a
//     null leaves file's value. A nil secret (no Secret, or no key) leaves
//     file alone.
//   - secret: secret alone (nil secret is an error); file only chose the
//     type.
//
// The result is defaulted and validated as a whole, as Load does (so a
// file holding only what the Secret lacks loads). Its CloudConfigType is
// file's; a cloudConfigType in the secret is ignored, with a line in
// UnknownFieldWarnings. Unknown fields of the secret are reported under
// secretLabel. Errors never hold the value of a secret of either document.
func LoadOverridden(file, secret []byte, secretLabel string) (*Config, error) {
	if len(file) > MaxConfigSize || len(secret) > MaxConfigSize {
		return nil, fmt.Errorf("configuration is larger than %d bytes", MaxConfigSize)
	}
	candidates := append(secretCandidates(file), secretCandidates(secret)...)
	c, err := loadOverridden(file, secret, secretLabel)
	if err != nil {
		if c != nil {
			candidates = append(candidates, c.secretValues()...)
		}
		return nil, scrubError(err, candidates)
	}
	return c, nil
}

func loadOverridden(file, secret []byte, label string) (*Config, error) {
	fdoc, err := parseDocument(file)
	if err != nil {
		return nil, err
	}
	mode, err := fdoc.cloudConfigType()
	if err != nil {
		return nil, err
	}
	if mode == CloudConfigTypeFile || (mode == CloudConfigTypeMerge && secret == nil) {
		return fdoc.load()
	}
	if secret == nil {
		return nil, fmt.Errorf("cloudConfigType %s: no configuration in %s", mode, label)
	}
	sdoc, err := parseDocument(secret)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	var warnings []string
	if v, ok := sdoc.tree["cloudConfigType"]; ok {
		delete(sdoc.tree, "cloudConfigType")
		warnings = append(warnings, fmt.Sprintf("%s: cloudConfigType (%v) ignored: azure.json's cloudConfigType (%s) decides how the Secret is read", label, v, mode))
	}
	out := &document{hints: map[string]string{}, warnings: warnings}
	for _, u := range sdoc.unknown {
		out.unknown = append(out.unknown, label+": "+u)
		if h, ok := sdoc.hints[u]; ok {
			out.hints[label+": "+u] = h
		}
	}
	if mode == CloudConfigTypeSecret {
		out.tree = sdoc.tree
	} else {
		out.tree = mergeTree(fdoc.tree, sdoc.tree)
		out.unknown = append(out.unknown, fdoc.unknown...)
		for k, h := range fdoc.hints {
			out.hints[k] = h
		}
	}
	out.tree["cloudConfigType"] = mode
	c, err := out.load()
	if err != nil {
		return c, fmt.Errorf("azure.json with %s (cloudConfigType %s): %w", label, mode, err)
	}
	return c, nil
}

// mergeTree returns base with over's keys laid over it: objects merged
// recursively, anything else (lists included) replaced; a null in over
// leaves base's value.
func mergeTree(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if v == nil {
			continue
		}
		if bo, ok := out[k].(map[string]any); ok {
			if oo, ok := v.(map[string]any); ok {
				out[k] = mergeTree(bo, oo)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// AddWarning adds a line to UnknownFieldWarnings: something the caller read
// and did not apply.
func (c *Config) AddWarning(line string) {
	c.extraWarnings = append(slices.Clone(c.extraWarnings), line)
}

// SecretKeys lists the top-level fields a Secret's document sets, as
// canonical field names (for a log line saying what it overrides; no
// values).
func SecretKeys(secret []byte) ([]string, error) {
	doc, err := parseDocument(limit(secret))
	if err != nil {
		return nil, scrubError(err, secretCandidates(secret))
	}
	keys := make([]string, 0, len(doc.tree))
	for k := range doc.tree {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// cloudConfigType reports a bad cloudConfigType.
func (v *validator) cloudConfigType(c *Config) {
	if c.CloudConfigType != "" && !slices.Contains(knownCloudConfigTypes, c.CloudConfigType) {
		v.add("cloudConfigType", fmt.Sprintf("%s; got %q", oneOf(knownCloudConfigTypes), c.CloudConfigType))
	}
}
