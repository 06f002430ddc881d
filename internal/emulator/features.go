package emulator

import (
	"net/http"
	"slices"
	"strings"
)

// Subscription features (Microsoft.Features), as `az feature register` and
// `az provider register` drive them:
//
//	POST /subscriptions/{s}/providers/Microsoft.Features/providers/{ns}/features/{name}/register
//	GET  /subscriptions/{s}/providers/Microsoft.Features/providers/{ns}/features/{name}
//	POST /subscriptions/{s}/providers/Microsoft.Features/providers/{ns}/features/{name}/unregister
//	POST /subscriptions/{s}/providers/{ns}/register
//
// A registration answers Registering, and the feature reads Registered from
// the next GET on; it takes effect only once the resource provider has been
// registered again after that, as Azure's preview-features procedure says
// (docs/emulator.md, Subscription features). Options.Features (--feature)
// are registered and in effect from the start.

// featuresAPIVersions are the Microsoft.Features api-versions served.
var featuresAPIVersions = []string{"2015-12-01", "2021-07-01"}

// knownFeatures are the features the emulator emulates; registering
// another is FeatureNotFound (ARM answers so for a name it does not know).
var knownFeatures = []string{FeatureConnectionDraining}

// featureState is one subscription's registration of one feature.
type featureState struct {
	state string // Registering, Registered, Unregistering, NotRegistered
	// inEffect: the provider was registered after the feature was.
	inEffect bool
}

// featureRegistered reports whether a feature is in effect for a
// subscription: given in Options.Features, or registered and then
// propagated by a provider registration.
func (e *Emulator) featureRegistered(sub, name string) bool {
	if f := e.features.Load(); f != nil && slices.ContainsFunc(*f, func(x string) bool { return strings.EqualFold(x, name) }) {
		return true
	}
	e.featMu.Lock()
	defer e.featMu.Unlock()
	st := e.featureStates[strings.ToLower(sub)][strings.ToLower(name)]
	return st != nil && st.inEffect
}

// serveFeature answers the Microsoft.Features routes of one feature.
func (e *Emulator) serveFeature(c *reqCtx) {
	if !slices.Contains(featuresAPIVersions, c.apiVersion) {
		writeARMError(c.w, gatewayError(http.StatusBadRequest, "InvalidApiVersionParameter",
			"The api-version '%s' is invalid. The supported versions are '%s'.", c.apiVersion, strings.Join(featuresAPIVersions, ",")))
		return
	}
	full := c.rt.ns + "/" + c.rt.name
	i := slices.IndexFunc(knownFeatures, func(f string) bool { return strings.EqualFold(f, full) })
	if i < 0 {
		writeARMError(c.w, gatewayError(http.StatusNotFound, "FeatureNotFound",
			"The feature '%s' could not be found (the emulator knows %s).", full, strings.Join(knownFeatures, ", ")))
		return
	}
	full = knownFeatures[i]
	action := strings.ToLower(c.rt.childType)
	switch {
	case action == "" && c.r.Method == http.MethodGet:
	case (action == "register" || action == "unregister") && c.r.Method == http.MethodPost:
	default:
		methodNotAllowed(c)
		return
	}
	e.featMu.Lock()
	subKey := strings.ToLower(c.rt.sub)
	if e.featureStates == nil {
		e.featureStates = map[string]map[string]*featureState{}
	}
	if e.featureStates[subKey] == nil {
		e.featureStates[subKey] = map[string]*featureState{}
	}
	st := e.featureStates[subKey][strings.ToLower(full)]
	if st == nil {
		st = &featureState{state: "NotRegistered"}
		e.featureStates[subKey][strings.ToLower(full)] = st
	}
	switch action {
	case "register":
		if st.state != "Registered" {
			st.state = "Registering"
		}
	case "unregister":
		st.state, st.inEffect = "Unregistering", false
	default: // a read moves a pending change on
		switch st.state {
		case "Registering":
			st.state = "Registered"
		case "Unregistering":
			st.state = "NotRegistered"
		}
	}
	state := st.state
	if f := e.features.Load(); f != nil && slices.ContainsFunc(*f, func(x string) bool { return strings.EqualFold(x, full) }) {
		state = "Registered"
	}
	e.featMu.Unlock()
	ns, name, _ := strings.Cut(full, "/")
	writeJSONTree(c.w, http.StatusOK, obj{
		"id":         "/subscriptions/" + c.rt.sub + "/providers/Microsoft.Features/providers/" + ns + "/features/" + name,
		"name":       full,
		"type":       "Microsoft.Features/providers/features",
		"properties": obj{"state": state},
	})
}

// registerProvider is POST /subscriptions/{s}/providers/{ns}/register: the
// features of that namespace registered so far take effect.
func (e *Emulator) registerProvider(c *reqCtx, ns string) {
	e.featMu.Lock()
	for name, st := range e.featureStates[strings.ToLower(c.rt.sub)] {
		if strings.HasPrefix(name, strings.ToLower(ns)+"/") && st.state == "Registered" {
			st.inEffect = true
		}
	}
	e.featMu.Unlock()
	writeJSONTree(c.w, http.StatusOK, obj{
		"id": "/subscriptions/" + c.rt.sub + "/providers/" + ns, "namespace": ns,
		"registrationState": "Registered", "registrationPolicy": "RegistrationRequired", "resourceTypes": []any{},
	})
}
