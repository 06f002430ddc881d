package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/azlb/azlb/internal/provider"
)

const chartDir = "../../deploy/helm/azlb"

// identitiesFile is the shape of the chart's files/identities.yaml.
type identitiesFile struct {
	Controllers map[string]struct {
		ServiceAccount string `json:"serviceAccount"`
	} `json:"controllers"`
	Always map[string]struct {
		ServiceAccount string `json:"serviceAccount"`
	} `json:"always"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestChartGrantsEveryControllerIdentity keeps the chart's RBAC in step with
// the binary: every controller with an azlb client identity, and every
// default controller, has an entry in files/identities.yaml under its
// --controllers name with that identity as ServiceAccount; the cloud
// provider's client has one too.
func TestChartGrantsEveryControllerIdentity(t *testing.T) {
	var ids identitiesFile
	readYAML(t, "files/identities.yaml", &ids)
	inits := controllerInitializers(&azlbFlags{})
	for name, c := range inits {
		client := c.InitContext.ClientName
		if !strings.HasPrefix(client, "azlb-") && !slices.Contains(defaultControllers(), name) {
			continue // a framework controller azlb neither runs nor renames
		}
		id, ok := ids.Controllers[name]
		if !ok {
			t.Errorf("controller %s (client %s) has no entry in %s/files/identities.yaml", name, client, chartDir)
			continue
		}
		if id.ServiceAccount != client {
			t.Errorf("controller %s: the chart grants ServiceAccount %s, the binary uses client %s", name, id.ServiceAccount, client)
		}
	}
	for name := range ids.Controllers {
		if _, ok := inits[name]; !ok {
			t.Errorf("files/identities.yaml names %s, which is no controller of the binary", name)
		}
	}
	if got := ids.Always["cloud-provider"].ServiceAccount; got != provider.CloudClientName {
		t.Errorf("cloud provider identity %q in the chart, %q in the binary", got, provider.CloudClientName)
	}
}

// TestChartRunsTheDefaultControllers: the chart's controllers value starts
// as the binary's defaults.
func TestChartRunsTheDefaultControllers(t *testing.T) {
	var values struct {
		Controllers []string `json:"controllers"`
	}
	readYAML(t, "values.yaml", &values)
	want := defaultControllers()
	slices.Sort(want)
	got := slices.Clone(values.Controllers)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("chart controllers %v, binary defaults %v", values.Controllers, want)
	}
}
