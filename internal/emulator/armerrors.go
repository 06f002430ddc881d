package emulator

import (
	"fmt"
	"net/http"
	"strings"
)

// armError is an ARM error response: {"error":{"code","message","details"}}.
type armError struct {
	status  int
	code    string
	message string
	// details are rendered as the "details" array; nil renders no member
	// unless withDetails is set (NRP always sends "details":[]).
	details     []armError
	withDetails bool
	// gateway marks errors ARM's front door produces (x-ms-failure-cause).
	gateway bool
	// header holds extra response headers (Retry-After, WWW-Authenticate).
	header map[string]string
	// target names the offending parameter (Compute's InvalidParameter).
	target string
}

func (e *armError) Error() string { return e.code + ": " + e.message }

func (e *armError) body() obj {
	inner := obj{"code": e.code, "message": e.message}
	if e.target != "" {
		inner["target"] = e.target
	}
	if e.withDetails || len(e.details) > 0 {
		ds := make([]any, 0, len(e.details))
		for i := range e.details {
			d := e.details[i]
			ds = append(ds, obj{"code": d.code, "message": d.message})
		}
		inner["details"] = ds
	}
	return obj{"error": inner}
}

// nrpError is an error raised by Microsoft.Network (always carries details).
func nrpError(status int, code, format string, args ...any) *armError {
	return &armError{status: status, code: code, message: fmt.Sprintf(format, args...), withDetails: true}
}

// gatewayError is an error raised by ARM's front door.
func gatewayError(status int, code, format string, args ...any) *armError {
	return &armError{status: status, code: code, message: fmt.Sprintf(format, args...), gateway: true}
}

func errMissingAPIVersion() *armError {
	return gatewayError(http.StatusBadRequest, "MissingApiVersionParameter",
		"The api-version query parameter (?api-version=) is required for all requests.")
}

func errResourceGroupNotFound(rg string) *armError {
	return gatewayError(http.StatusNotFound, "ResourceGroupNotFound", "Resource group '%s' could not be found.", rg)
}

func errResourceNotFound(fullType, name, rg string) *armError {
	return gatewayError(http.StatusNotFound, "ResourceNotFound",
		"The Resource '%s/%s' under resource group '%s' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix",
		fullType, name, rg)
}

// errChildNotFound is NRP's 404 for a missing child resource.
func errChildNotFound(id string) *armError {
	return nrpError(http.StatusNotFound, "NotFound", "Resource %s not found.", id)
}

func errInvalidJSON(err error) *armError {
	return gatewayError(http.StatusBadRequest, "InvalidRequestContent",
		"The request content was invalid and could not be deserialized: '%s'.", sanitizeMsg(err.Error()))
}

// errBadShape is NRP's answer to a body that is JSON but of the wrong shape.
func errBadShape(err error) *armError {
	e := nrpError(http.StatusBadRequest, "InvalidRequestFormat", "Cannot parse the request.")
	e.details = []armError{{code: "InvalidJson", message: sanitizeMsg(err.Error())}}
	return e
}

func errInvalidReference(refID, byID string) *armError {
	return nrpError(http.StatusBadRequest, "InvalidResourceReference",
		"Resource %s referenced by resource %s was not found. Please make sure that the referenced resource exists, and that both resources are in the same region.",
		refID, byID)
}

func errPreconditionMismatch(given, current, id string) *armError {
	e := &armError{status: http.StatusPreconditionFailed, code: "PreconditionFailed", message: "Precondition failed."}
	e.details = []armError{{code: "PreconditionFailedEtagMismatch", message: fmt.Sprintf(
		"Etag provided in if-match header %s does not match etag %s of resource %s in NRP data store.", given, current, id)}}
	return e
}

func errPreconditionMissing(id string) *armError {
	e := &armError{status: http.StatusPreconditionFailed, code: "PreconditionFailed", message: "Precondition failed."}
	e.details = []armError{{code: "PreconditionFailedResourceNotFound", message: fmt.Sprintf(
		"If-Match header was provided but resource %s does not exist in NRP data store.", id)}}
	return e
}

func errPreconditionExists(id, current string) *armError {
	e := &armError{status: http.StatusPreconditionFailed, code: "PreconditionFailed", message: "Precondition failed."}
	e.details = []armError{{code: "PreconditionFailedResourceExists", message: fmt.Sprintf(
		"If-None-Match header * was provided but resource %s already exists with etag %s in NRP data store.", id, current)}}
	return e
}

func errAnotherOperation(opURL string) *armError {
	return nrpError(http.StatusConflict, "AnotherOperationInProgress",
		"Another operation on this or dependent resource is in progress. To retrieve status of the operation use uri: %s.", opURL)
}

// sanitizeMsg keeps messages on one line and bounded.
func sanitizeMsg(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
