package main

import (
	"context"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"

	"github.com/azlb/azlb/internal/provider"
	"github.com/azlb/azlb/internal/readinessgate"
	"github.com/azlb/azlb/internal/servicegateway"
)

// startReadinessGate runs the pod readiness gate (internal/readinessgate)
// with the service gateway engine e, under the gateway's identity: it reads
// every pod (an informer of its own, with that identity), and patches the
// gate condition in pods/status. Call it before e runs: the engine must
// know the gated pods from its first read of the endpoints.
func startReadinessGate(ctx context.Context, cfg *cloudcontrollerconfig.CompletedConfig, client kubernetes.Interface, e *servicegateway.Controller) error {
	pods := informers.NewSharedInformerFactory(client, 0)
	f := cfg.SharedInformers
	gate, err := readinessgate.New(readinessgate.Options{
		Client:     client,
		Pods:       pods.Core().V1().Pods(),
		Namespaces: f.Core().V1().Namespaces(),
		Services:   f.Core().V1().Services(),
		Gateway:    e,
		Recorder:   provider.NewRecorder(ctx, client, clientGateway),
	})
	if err != nil {
		return err
	}
	e.UseGatedPods(gate)
	pods.Start(ctx.Done())
	go run(ctx, gate.Name(), gate.Run)
	return nil
}
