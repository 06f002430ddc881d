package imds

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// DefaultEndpoint is where Azure serves IMDS to every VM.
const DefaultEndpoint = "http://169.254.169.254"

// APIVersion is the IMDS api-version the client asks for.
const APIVersion = "2021-02-01"

// Client reads a VM's instance metadata.
type Client struct {
	// Endpoint is the IMDS base URL (DefaultEndpoint on Azure; on the
	// emulator https://host:port/imds/{sub}/{rg}/{vm}).
	Endpoint string
	// HTTP is the client used; nil: one with a 10 s timeout and no proxy
	// (IMDS must never go through a proxy).
	HTTP *http.Client
}

// Instance is the part of /metadata/instance azlb uses.
type Instance struct {
	Compute Compute `json:"compute"`
	Network Network `json:"network"`
}

// Compute is the compute section of the instance metadata.
type Compute struct {
	Name                string    `json:"name"`
	Location            string    `json:"location"`
	ResourceID          string    `json:"resourceId"`
	VMID                string    `json:"vmId"`
	VMSize              string    `json:"vmSize"`
	VMScaleSetName      string    `json:"vmScaleSetName"`
	Zone                string    `json:"zone"`
	PlatformFaultDomain string    `json:"platformFaultDomain"`
	OSType              string    `json:"osType"`
	OSProfile           OSProfile `json:"osProfile"`
	SubscriptionID      string    `json:"subscriptionId"`
	ResourceGroupName   string    `json:"resourceGroupName"`
}

// OSProfile is compute.osProfile.
type OSProfile struct {
	ComputerName string `json:"computerName"`
}

// Network is the network section: the VM's interfaces, the primary first.
type Network struct {
	Interface []Interface `json:"interface"`
}

// Interface is one network interface.
type Interface struct {
	IPv4       Addresses `json:"ipv4"`
	IPv6       Addresses `json:"ipv6"`
	MACAddress string    `json:"macAddress"`
}

// Addresses are an interface's addresses of one family, the primary
// first.
type Addresses struct {
	IPAddress []IPAddress `json:"ipAddress"`
}

// IPAddress is one private (and public) address.
type IPAddress struct {
	PrivateIPAddress string `json:"privateIpAddress"`
	PublicIPAddress  string `json:"publicIpAddress"`
}

// Error is an IMDS error answer.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("instance metadata service answered %d: %s", e.Status, e.Message)
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
}

// Instance fetches /metadata/instance.
func (c *Client) Instance(ctx context.Context) (*Instance, error) {
	u := strings.TrimSuffix(c.Endpoint, "/") + "/metadata/instance?api-version=" + APIVersion
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Metadata", "true")
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("instance metadata: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("instance metadata: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(body))
		}
		return nil, &Error{Status: resp.StatusCode, Message: e.Error}
	}
	var inst Instance
	if err := json.Unmarshal(body, &inst); err != nil {
		return nil, fmt.Errorf("instance metadata: %w", err)
	}
	return &inst, nil
}
