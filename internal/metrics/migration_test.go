package metrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

func TestMigrationSeries(t *testing.T) {
	SetBasicLoadBalancers(2)
	CountMigrationStep(MigrationStepDecouple, nil)
	CountMigrationStep(MigrationStepDelete, errors.New("refused"))
	ObserveMigration(1500 * time.Millisecond)
	CountPublicIPUpgrade(nil)
	want := `
# HELP cloudprovider_azure_basic_migration_basic_load_balancers [ALPHA] Managed Basic load balancers the last migration check found (0 once they are migrated).
# TYPE cloudprovider_azure_basic_migration_basic_load_balancers gauge
cloudprovider_azure_basic_migration_basic_load_balancers 2
# HELP cloudprovider_azure_basic_migration_duration_seconds [ALPHA] How long the last migration that removed Basic load balancers took, from finding them to their deletion.
# TYPE cloudprovider_azure_basic_migration_duration_seconds gauge
cloudprovider_azure_basic_migration_duration_seconds 1.5
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), MigrationBasicLoadBalancersName, MigrationDurationName); err != nil {
		t.Error(err)
	}
	testutil.AssertVectorCount(t, MigrationStepsName, map[string]string{"step": MigrationStepDecouple, "result": "success"}, 1)
	testutil.AssertVectorCount(t, MigrationStepsName, map[string]string{"step": MigrationStepDelete, "result": "failure"}, 1)
	testutil.AssertVectorCount(t, MigrationPublicIPUpgradesName, map[string]string{"result": "success"}, 1)
}
