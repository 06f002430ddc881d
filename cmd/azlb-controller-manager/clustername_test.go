package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"

	"github.com/azlb/azlb/internal/provider"
)

// azureJSON is a valid azure.json; clusterName is added when set.
func azureJSON(t *testing.T, clusterName string) string {
	t.Helper()
	doc := `{"tenantId": "t", "subscriptionId": "00000000-0000-0000-0000-000000000000", "resourceGroup": "rg",
		"location": "eastus", "aadClientId": "client", "aadClientSecret": "secret", "loadBalancerSku": "standard"`
	if clusterName != "" {
		doc += `, "clusterName": "` + clusterName + `"`
	}
	path := filepath.Join(t.TempDir(), "azure.json")
	if err := os.WriteFile(path, []byte(doc+"}"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The framework's --cluster-name names the cluster when azure.json has no
// clusterName, as on a CAPZ cluster; both set and different is a clear
// error at start; the flag's default does not override azure.json
// (issue 26).
func TestClusterNameFlag(t *testing.T) {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		t.Fatal(err)
	}
	flags := &azlbFlags{}
	cmd := app.NewCloudControllerManagerCommand(opts, cloudInitializer(flags), controllerInitializers(flags), names.CCMControllerAliases(), flags.flagSets(), wait.NeverStop)
	if err := cmd.ParseFlags(nil); err != nil || clusterNameGiven(cmd) {
		t.Fatalf("no flag: given = %v (%v), want false", clusterNameGiven(cmd), err)
	}
	if err := cmd.ParseFlags([]string{"--cluster-name=capz-cluster"}); err != nil || !clusterNameGiven(cmd) {
		t.Fatalf("--cluster-name: given = %v (%v), want true", clusterNameGiven(cmd), err)
	}

	load := func(file, flag string, given bool) (*provider.Cloud, error) {
		c := &cloudcontrollerconfig.Config{}
		c.ComponentConfig.KubeCloudShared.CloudProvider.Name = provider.ProviderName
		c.ComponentConfig.KubeCloudShared.CloudProvider.CloudConfigFile = file
		c.ComponentConfig.KubeCloudShared.ClusterName = flag
		az, err := loadCloud(c.Complete(), &azlbFlags{clusterNameGiven: given})
		if az != nil {
			t.Cleanup(az.Clients.Close)
		}
		return az, err
	}
	az, err := load(azureJSON(t, ""), "capz-cluster", true)
	if err != nil {
		t.Fatal(err)
	}
	if az.Config.ClusterName != "capz-cluster" || az.Config.DefaultLoadBalancerName() != "capz-cluster" {
		t.Errorf("cluster %q, load balancer %q; want capz-cluster", az.Config.ClusterName, az.Config.DefaultLoadBalancerName())
	}
	az, err = load(azureJSON(t, "mine"), "kubernetes", false)
	if err != nil || az.Config.ClusterName != "mine" {
		t.Errorf("flag default: cluster %q (%v), want azure.json's mine", az.Config.ClusterName, err)
	}
	_, err = load(azureJSON(t, "mine"), "capz-cluster", true)
	if err == nil || !strings.Contains(err.Error(), "mine") || !strings.Contains(err.Error(), "capz-cluster") {
		t.Errorf("both set and different: err %v, want one naming both", err)
	}
}
