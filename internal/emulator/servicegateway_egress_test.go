package emulator

import (
	"net/http"
	"strings"
	"testing"
)

func sgwID() string { return netID(sgwRG, "serviceGateways", "servicegateway") }

func natBody(sku, pip, gw string) string {
	props := `"publicIpAddresses":[{"id":"` + netID(sgwRG, "publicIPAddresses", pip) + `"}]`
	switch gw {
	case "":
	case "null":
		props += `,"serviceGateway":null`
	default:
		props += `,"serviceGateway":{"id":"` + gw + `"}`
	}
	return `{"location":"eastus","sku":{"name":"` + sku + `"},"properties":{` + props + `}}`
}

func outboundBody(name, nat string) string {
	return `{"action":"PartialUpdate","serviceRequests":[{"service":{"name":"` + name +
		`","properties":{"serviceType":"Outbound","isDefault":false,"publicNatGatewayId":"` + netID(sgwRG, "natGateways", nat) + `"}}}]}`
}

func unregisterBody(name string) string {
	return `{"action":"PartialUpdate","serviceRequests":[{"isDelete":true,"service":{"name":"` + name + `"}}]}`
}

// An egress identity's life in the emulator: a StandardV2 NAT gateway with
// a StandardV2 public IP attached to the gateway, its Outbound service,
// pod addresses under it (one with an inbound service too), and the only
// teardown order the emulator accepts: drain, detach (explicit null),
// unregister, delete the NAT gateway, delete the public IP.
func TestServiceGatewayEgressLifecycle(t *testing.T) {
	h := sgwEnv(t, Options{})
	natPath := netPath(sgwRG, "natGateways", "egress1")
	pipPath := netPath(sgwRG, "publicIPAddresses", "egress1-pip")
	h.mustDo(t, http.StatusCreated, http.MethodPut, pipPath, `{"location":"eastus","sku":{"name":"StandardV2"},"properties":{"publicIPAllocationMethod":"Static"}}`)
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath(sgwRG, "publicIPAddresses", "std-pip"), `{"location":"eastus","sku":{"name":"Standard"},"properties":{"publicIPAllocationMethod":"Static"}}`)

	// Attaching needs StandardV2 for the NAT gateway and its public IPs, and
	// an existing gateway.
	for _, b := range []struct{ name, body, code string }{
		{"Standard NAT gateway", natBody("Standard", "egress1-pip", sgwID()), codeNatGatewaySku},
		{"Standard public IP", natBody("StandardV2", "std-pip", sgwID()), codeNatGatewaySku},
		{"no public IP", `{"location":"eastus","sku":{"name":"StandardV2"},"properties":{"serviceGateway":{"id":"` + sgwID() + `"}}}`, codeNatGatewaySku},
		{"missing gateway", natBody("StandardV2", "egress1-pip", netID(sgwRG, "serviceGateways", "nope")), "InvalidResourceReference"},
	} {
		if rec := h.do(t, http.MethodPut, natPath, b.body, nil); rec.Code != http.StatusBadRequest || errCodeOf(rec) != b.code {
			t.Errorf("%s: %d %s, want 400 %s", b.name, rec.Code, rec.Body, b.code)
		}
	}
	// A NAT gateway that is not attached cannot back an Outbound service.
	h.mustDo(t, http.StatusCreated, http.MethodPut, natPath, natBody("StandardV2", "egress1-pip", ""))
	if code, ec := h.post(t, "updateServices", outboundBody("egress1", "egress1")); code != http.StatusBadRequest || ec != codeNatGatewayNotAttached {
		t.Fatalf("outbound service on a detached NAT gateway: %d %s", code, ec)
	}
	h.mustDo(t, http.StatusOK, http.MethodPut, natPath, natBody("StandardV2", "egress1-pip", sgwID()))
	// Omitting serviceGateway keeps the attachment.
	doc := h.mustDo(t, http.StatusOK, http.MethodPut, natPath, natBody("StandardV2", "egress1-pip", ""))
	if props, _ := doc["properties"].(map[string]any); props["serviceGateway"] == nil {
		t.Fatalf("a PUT without serviceGateway detached the NAT gateway: %v", doc)
	}
	h.mustPost(t, "updateServices", outboundBody("egress1", "egress1"))

	// Pods egress through it; one also backs an inbound Service.
	serviceLB(t, h, "in1")
	h.mustPost(t, "updateServices", registerBody("PartialUpdate", "in1"))
	h.mustPost(t, "updateAddressLocations", locBody("PartialUpdate", loc("10.1.0.4", "FullUpdate", addr("10.2.0.5", "egress1"), addr("10.2.0.6", "egress1", "in1"))))
	assertLocations(t, h, map[string]map[string]string{"10.1.0.4": {"10.2.0.5": "egress1", "10.2.0.6": "egress1,in1"}})

	// A second NAT-backed outbound service on one address is refused.
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath(sgwRG, "publicIPAddresses", "egress2-pip"), `{"location":"eastus","sku":{"name":"StandardV2"},"properties":{"publicIPAllocationMethod":"Static"}}`)
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath(sgwRG, "natGateways", "egress2"), natBody("StandardV2", "egress2-pip", sgwID()))
	h.mustPost(t, "updateServices", outboundBody("egress2", "egress2"))
	if code, ec := h.post(t, "updateAddressLocations", locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", addr("10.2.0.5", "egress1", "egress2")))); code != http.StatusBadRequest || ec != codeMultipleOutbound {
		t.Errorf("two outbound services on one address: %d %s", code, ec)
	}

	// Teardown out of order is refused at every step.
	if rec := h.do(t, http.MethodPut, natPath, natBody("StandardV2", "egress1-pip", "null"), nil); rec.Code != http.StatusBadRequest || errCodeOf(rec) != codeNatGatewayInUse {
		t.Errorf("detach with addresses mapped: %d %s", rec.Code, rec.Body)
	}
	if code, ec := h.post(t, "updateServices", unregisterBody("egress1")); code != http.StatusBadRequest || ec != codeOverlayMappings {
		t.Errorf("unregister with addresses mapped: %d %s", code, ec)
	}
	h.mustPost(t, "updateAddressLocations", locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", addr("10.2.0.5"), addr("10.2.0.6", "in1"))))
	if code, ec := h.post(t, "updateServices", unregisterBody("egress1")); code != http.StatusBadRequest || ec != codeNatGatewayAttached {
		t.Errorf("unregister while the NAT gateway is attached: %d %s", code, ec)
	}
	if rec := h.do(t, http.MethodDelete, natPath, "", nil); rec.Code != http.StatusBadRequest || errCodeOf(rec) != codeNatGatewayAttached {
		t.Errorf("delete an attached NAT gateway: %d %s", rec.Code, rec.Body)
	}
	h.mustDo(t, http.StatusOK, http.MethodPut, natPath, natBody("StandardV2", "egress1-pip", "null"))
	if code, ec := h.post(t, "updateAddressLocations", locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", addr("10.2.0.5", "egress1")))); code != http.StatusBadRequest || ec != codeNatGatewayNotAttached {
		t.Errorf("address on a service whose NAT gateway is detached: %d %s", code, ec)
	}
	if rec := h.do(t, http.MethodDelete, natPath, "", nil); rec.Code != http.StatusBadRequest || errCodeOf(rec) != codeNatGatewayInUse {
		t.Errorf("delete a NAT gateway a service names: %d %s", rec.Code, rec.Body)
	}
	if rec := h.do(t, http.MethodDelete, pipPath, "", nil); rec.Code != http.StatusBadRequest {
		t.Errorf("delete the NAT gateway's public IP: %d %s", rec.Code, rec.Body)
	}
	h.mustPost(t, "updateServices", unregisterBody("egress1"))
	h.mustDo(t, http.StatusAccepted, http.MethodDelete, natPath, "")
	h.mustDo(t, http.StatusAccepted, http.MethodDelete, pipPath, "")
	assertLocations(t, h, map[string]map[string]string{"10.1.0.4": {"10.2.0.6": "in1"}})
}

// A NAT gateway attached to one gateway is not moved to another without
// being detached first.
func TestServiceGatewayEgressNoMove(t *testing.T) {
	h := sgwEnv(t, Options{})
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath(sgwRG, "publicIPAddresses", "p"), `{"location":"eastus","sku":{"name":"StandardV2"},"properties":{"publicIPAllocationMethod":"Static"}}`)
	other := strings.Replace(sgwPath(""), "servicegateway?", "other?", 1)
	body := strings.Replace(h.do(t, http.MethodGet, sgwPath(""), "", nil).Body.String(), `"name":"servicegateway"`, `"name":"other"`, 1)
	body = strings.Replace(body, `"privateIPAddress":"10.0.0.4"`, `"privateIPAddress":"10.0.0.5"`, 1)
	if rec := h.do(t, http.MethodPut, other, body, nil); rec.Code != http.StatusCreated {
		t.Fatalf("second gateway: %d %s", rec.Code, rec.Body)
	}
	nat := netPath(sgwRG, "natGateways", "n")
	h.mustDo(t, http.StatusCreated, http.MethodPut, nat, natBody("StandardV2", "p", sgwID()))
	if rec := h.do(t, http.MethodPut, nat, natBody("StandardV2", "p", netID(sgwRG, "serviceGateways", "other")), nil); rec.Code != http.StatusBadRequest || errCodeOf(rec) != codeNatGatewayAttached {
		t.Errorf("move to another gateway: %d %s", rec.Code, rec.Body)
	}
}
