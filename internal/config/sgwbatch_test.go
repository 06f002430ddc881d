package config

import (
	"strings"
	"testing"
)

// serviceGatewayUpdateServicesBatchSize: unset or 0 is the default, a
// positive value is taken as is, a negative one is refused.
func TestServiceGatewayUpdateServicesBatchSize(t *testing.T) {
	c := baseConfig()
	if got := c.UpdateServicesBatchSize(); got != DefaultServiceGatewayUpdateServicesBatchSize {
		t.Errorf("unset: %d, want the default %d", got, DefaultServiceGatewayUpdateServicesBatchSize)
	}
	c.ServiceGatewayUpdateServicesBatchSize = 1
	if err := c.Validate(); err != nil || c.UpdateServicesBatchSize() != 1 {
		t.Errorf("1: %d, %v", c.UpdateServicesBatchSize(), err)
	}
	c.ServiceGatewayUpdateServicesBatchSize = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "serviceGatewayUpdateServicesBatchSize: must not be negative") {
		t.Errorf("-1: %v", err)
	}
}
