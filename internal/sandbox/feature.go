package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	armruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/arm/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
)

// featuresAPIVersion and providersAPIVersion are the api-versions
// RegisterFeature calls Microsoft.Features and Microsoft.Resources with.
const (
	featuresAPIVersion  = "2021-07-01"
	providersAPIVersion = "2021-04-01"
	featureWait         = 2 * time.Minute
)

// RegisterFeature registers a subscription feature ("Namespace/Name", for
// example Microsoft.Network/SLBAllowConnectionDraining) in the sandbox's
// subscription the way Azure's preview-feature procedure does it (`az
// feature register`, then `az provider register` once it reads
// Registered), through ARM with the sandbox's azure.json credentials.
func RegisterFeature(ctx context.Context, dir, feature string, out io.Writer) error {
	ns, name, ok := strings.Cut(feature, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("%q is not a feature name: want Namespace/Name, for example Microsoft.Network/SLBAllowConnectionDraining", feature)
	}
	cfg, err := config.LoadFile(filepath.Join(dir, AzureJSONFile))
	if err != nil {
		return err
	}
	clients, err := azure.NewClients(ctx, cfg, azure.ClientOptions{Source: "azlb-sandbox"})
	if err != nil {
		return err
	}
	defer clients.Close()
	pl, err := armruntime.NewPipeline("azlb-sandbox", "v0", clients.Credential(), runtime.PipelineOptions{}, clients.ARMClientOptions("sandbox-features"))
	if err != nil {
		return err
	}
	endpoint := strings.TrimRight(cfg.ResourceManagerEndpoint, "/")
	featureURL := fmt.Sprintf("%s/subscriptions/%s/providers/Microsoft.Features/providers/%s/features/%s", endpoint, cfg.SubscriptionID, ns, name)
	call := func(ctx context.Context, method, url, apiVersion string) (map[string]any, error) {
		req, err := runtime.NewRequest(ctx, method, url+"?api-version="+apiVersion)
		if err != nil {
			return nil, err
		}
		resp, err := pl.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, runtime.NewResponseError(resp)
		}
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, url, err)
		}
		return body, nil
	}
	state := func(body map[string]any) string {
		props, _ := body["properties"].(map[string]any)
		s, _ := props["state"].(string)
		return s
	}
	body, err := call(ctx, http.MethodPost, featureURL+"/register", featuresAPIVersion)
	if err != nil {
		return fmt.Errorf("register feature %s: %w", feature, err)
	}
	fmt.Fprintf(out, "feature %s: %s\n", feature, state(body))
	err = wait.PollUntilContextTimeout(ctx, time.Second, featureWait, false, func(ctx context.Context) (bool, error) {
		body, err = call(ctx, http.MethodGet, featureURL, featuresAPIVersion)
		return err == nil && state(body) == "Registered", err
	})
	if err != nil {
		return fmt.Errorf("feature %s did not read Registered within %v: %w", feature, featureWait, err)
	}
	fmt.Fprintf(out, "feature %s: Registered\n", feature)
	if _, err := call(ctx, http.MethodPost, fmt.Sprintf("%s/subscriptions/%s/providers/%s/register", endpoint, cfg.SubscriptionID, ns), providersAPIVersion); err != nil {
		return fmt.Errorf("register resource provider %s: %w", ns, err)
	}
	fmt.Fprintf(out, "resource provider %s registered again: the feature is in effect\n", ns)
	return nil
}
