package emulator

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
)

// serveOperation answers Azure-AsyncOperation and operationResults polls of
// Microsoft.Network operations.
func (e *Emulator) serveOperation(c *reqCtx) {
	if c.r.Method != http.MethodGet {
		methodNotAllowed(c)
		return
	}
	e.mu.RLock()
	now := e.clock.Now()
	var op *operation
	if s := e.subs[strings.ToLower(c.rt.sub)]; s != nil {
		op = s.ops[strings.ToLower(c.rt.opID)]
	}
	e.mu.RUnlock()
	compute := strings.EqualFold(c.rt.ns, "Microsoft.Compute")
	if op == nil || op.rgDelete || !strings.EqualFold(op.location, c.rt.location) || op.compute != compute {
		writeARMError(c.w, nrpError(http.StatusNotFound, "OperationNotFound",
			"The operation '%s' could not be found.", c.rt.opID))
		return
	}
	if compute {
		e.serveComputeOperation(c, op, now)
		return
	}
	status := op.status(now)
	if c.rt.kind == routeOperation {
		body := obj{"status": status}
		if status == resultFailed || status == resultCanceled {
			body["error"] = obj{"code": op.errCode, "message": op.errMessage, "details": []any{}}
		}
		writeJSON(c.w, http.StatusOK, mustMarshal(body))
		return
	}
	// operationResults: 202 while running, then the final outcome.
	switch status {
	case "InProgress":
		c.w.Header().Set("Location", c.locationURL(op))
		c.w.Header().Set("Azure-AsyncOperation", c.asyncURL(op))
		c.w.WriteHeader(http.StatusAccepted)
	case resultSucceeded:
		c.w.WriteHeader(http.StatusNoContent)
	default:
		writeARMError(c.w, nrpError(http.StatusBadRequest, op.errCode, "%s", op.errMessage))
	}
}

// groupJobToken encodes the opaque operationresults token of a resource
// group deletion, in the shape ARM uses (base64url JSON naming the job).
func groupJobToken(opID, rg, location string) string {
	b, _ := json.Marshal(map[string]string{
		"jobId":       "RESOURCEGROUPDELETIONJOB-" + strings.ToUpper(rg) + ":" + opID,
		"jobLocation": location,
	})
	return base64.RawURLEncoding.EncodeToString(b)
}

// groupJobOpID extracts the operation id from a token.
func groupJobOpID(token string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", false
	}
	var m map[string]string
	if json.Unmarshal(b, &m) != nil {
		return "", false
	}
	job := m["jobId"]
	i := strings.LastIndexByte(job, ':')
	if i < 0 {
		return "", false
	}
	return job[i+1:], true
}

// serveGroupOpResult answers polls of a resource group deletion.
func (e *Emulator) serveGroupOpResult(c *reqCtx) {
	if c.r.Method != http.MethodGet {
		methodNotAllowed(c)
		return
	}
	now := e.clock.Now()
	var op *operation
	if id, ok := groupJobOpID(c.rt.opID); ok {
		e.mu.RLock()
		if s := e.subs[strings.ToLower(c.rt.sub)]; s != nil {
			op = s.ops[strings.ToLower(id)]
		}
		e.mu.RUnlock()
	}
	if op == nil || !op.rgDelete {
		writeARMError(c.w, gatewayError(http.StatusNotFound, "OperationNotFound",
			"The operation result '%s' could not be found.", c.rt.opID))
		return
	}
	switch op.status(now) {
	case "InProgress":
		c.w.Header().Set("Location", c.base+c.r.URL.Path+"?api-version="+c.apiVersion)
		c.w.Header().Set("Content-Length", "0")
		c.w.WriteHeader(http.StatusAccepted)
	case resultSucceeded:
		c.w.Header().Set("Content-Length", "0")
		c.w.WriteHeader(http.StatusOK)
	default:
		writeARMError(c.w, gatewayError(http.StatusConflict, op.errCode, "%s", op.errMessage))
	}
}
