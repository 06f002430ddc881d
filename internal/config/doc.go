// Package config loads, defaults and validates azure.json, the cloud
// configuration file of azlb.
//
// Contract:
//
//   - Load and LoadFile parse a JSON or YAML document, apply SetDefaults and
//     run Validate. They return either a usable *Config or an error, never
//     both and never a panic, whatever the input. Input larger than
//     MaxConfigSize, empty input (ErrEmpty) and a document that is not an
//     object are errors.
//   - Field names match the json tags of Config exactly or, failing that,
//     case-insensitively, so files written for the upstream Azure cloud
//     provider (including the legacy key cloudProviderRatelimit) load
//     unchanged. Numbers and booleans given for string fields are read as
//     strings. Keys naming no field are ignored and reported by
//     (*Config).UnknownFields for the caller to log.
//   - Errors name the JSON field path and the rule broken
//     ("loadBalancerSku: must be one of basic, standard, service; got ...").
//     Type and validation problems are all reported at once (errors.Join of
//     *FieldError).
//   - loadBalancerSku basic loads (tools read a Basic cluster's azure.json
//     as it is), but CheckController refuses it with an error that explains
//     the retirement of Basic Load Balancer and how to migrate
//     (RetiredBasicSKU); the controller runs CheckController before it
//     starts.
//   - Secrets (type Secret) never appear in String/GoString/fmt output, JSON,
//     logr/slog values or error messages; Reveal returns the value.
//   - SetDefaults is idempotent and does not write through pointers it did
//     not allocate. Validate does not modify its receiver; it judges the
//     configuration as SetDefaults would leave it, and reads caCertFile.
//   - Every method except SetDefaults only reads the Config, so a loaded
//     Config may be shared between goroutines as long as nobody modifies it.
//
// docs/configuration.md describes every field for users.
package config
