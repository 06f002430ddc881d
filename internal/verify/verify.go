package verify

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/lbclass"
)

// UserAgent starts the User-Agent of verify's ARM requests, so that request
// logs tell them from the controllers'.
const UserAgent = "azlb-verify"

// errReadOnly is what a write through verify's clients would get.
var errReadOnly = errors.New("azlb verify only reads")

// NewReadOnlyClients builds ARM clients for cfg that cannot write: a write
// fence refuses every PUT, PATCH, POST and DELETE before it is sent. Their
// requests' User-Agent starts with UserAgent.
func NewReadOnlyClients(ctx context.Context, cfg *config.Config) (*azure.Clients, error) {
	c := *cfg
	c.UserAgent = UserAgent
	clients, err := azure.NewClients(ctx, &c, azure.ClientOptions{Source: "azlb-verify"})
	if err != nil {
		return nil, err
	}
	clients.SetWriteFence(func() error { return errReadOnly })
	return clients, nil
}

// Run reads the cluster and Azure once and checks them, for azlb as the
// default implementation (no load-balancer class).
func Run(ctx context.Context, cfg *config.Config, clients *azure.Clients, kube kubernetes.Interface) (*Report, error) {
	return RunClass(ctx, cfg, clients, kube, "")
}

// RunClass is Run for azlb serving class (--load-balancer-class, the zero
// Class: none): only the Services of that class are judged. A class with
// pod-based load balancing is an error, as it is for the controller.
func RunClass(ctx context.Context, cfg *config.Config, clients *azure.Clients, kube kubernetes.Interface, class lbclass.Class) (*Report, error) {
	if !class.IsDefault() && cfg.ServiceGatewayEnabled {
		return nil, fmt.Errorf("--load-balancer-class=%s: not supported with pod-based load balancing (serviceGatewayEnabled)", class)
	}
	s, err := Collect(ctx, cfg, clients, kube)
	if err != nil {
		return nil, err
	}
	s.Class = class
	rep := Check(s)
	rep.Warnings = append(rep.Warnings, cfg.UnknownFieldWarnings()...)
	return rep, nil
}
