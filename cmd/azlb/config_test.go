package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/azlb/azlb/internal/devenv"
)

// status and verify read the cluster name as the controller does: its
// --cluster-name when azure.json has none, an error when both differ.
func TestLoadConfigTakesTheClusterNameFlag(t *testing.T) {
	write := func(cluster string) string {
		var m map[string]any
		if err := json.Unmarshal(devenv.ConfigJSON("https://127.0.0.1:1", ""), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "clusterName")
		delete(m, "caCertFile")
		if cluster != "" {
			m["clusterName"] = cluster
		}
		b, _ := json.Marshal(m)
		p := filepath.Join(t.TempDir(), "azure.json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := loadConfig(context.Background(), write(""), "capz-cluster", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClusterName != "capz-cluster" {
		t.Fatalf("no clusterName, --cluster-name capz-cluster: cluster %q", cfg.ClusterName)
	}
	if cfg, err = loadConfig(context.Background(), write(""), "", nil); err != nil || cfg.ClusterName != "kubernetes" {
		t.Fatalf("neither set: %v %+v, want the default kubernetes", err, cfg)
	}
	if _, err := loadConfig(context.Background(), write("one"), "two", nil); err == nil || !strings.Contains(err.Error(), "--cluster-name") {
		t.Fatalf("clusterName one, --cluster-name two: %v, want an error naming the flag", err)
	}
}
