package metrics

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Series of the Basic to Standard load balancer migration, all
// cloudprovider_azure_basic_migration_*.
const (
	MigrationBasicLoadBalancersName = "cloudprovider_azure_basic_migration_basic_load_balancers"
	MigrationStepsName              = "cloudprovider_azure_basic_migration_steps_total"
	MigrationDurationName           = "cloudprovider_azure_basic_migration_duration_seconds"
	MigrationPublicIPUpgradesName   = "cloudprovider_azure_basic_migration_public_ip_upgrades_total"
)

// Migration steps, the step label of MigrationStepsName.
const (
	MigrationStepKeepAddresses = "keep_addresses"
	MigrationStepDecouple      = "decouple"
	MigrationStepDelete        = "delete_load_balancer"
)

func migrationName(n string) string { return "basic_migration_" + n }

var (
	migBasic = metrics.NewGauge(&metrics.GaugeOpts{Namespace: Namespace, Subsystem: Subsystem, Name: migrationName("basic_load_balancers"),
		Help: "Managed Basic load balancers the last migration check found (0 once they are migrated).", StabilityLevel: metrics.ALPHA})
	migSteps = metrics.NewCounterVec(&metrics.CounterOpts{Namespace: Namespace, Subsystem: Subsystem, Name: migrationName("steps_total"),
		Help: "Steps of the Basic to Standard migration, by step (keep_addresses, decouple, delete_load_balancer) and result (success, failure).", StabilityLevel: metrics.ALPHA},
		[]string{"step", "result"})
	migDuration = metrics.NewGauge(&metrics.GaugeOpts{Namespace: Namespace, Subsystem: Subsystem, Name: migrationName("duration_seconds"),
		Help: "How long the last migration that removed Basic load balancers took, from finding them to their deletion.", StabilityLevel: metrics.ALPHA})
	migUpgrades = metrics.NewCounterVec(&metrics.CounterOpts{Namespace: Namespace, Subsystem: Subsystem, Name: migrationName("public_ip_upgrades_total"),
		Help: "Basic public IPs of Services upgraded to Standard (result success) or left as they are with an error (result failure).", StabilityLevel: metrics.ALPHA},
		[]string{"result"})

	migRegisterOnce sync.Once
)

func registerMigration() {
	migRegisterOnce.Do(func() {
		legacyregistry.MustRegister(migBasic, migSteps, migDuration, migUpgrades)
	})
}

// SetBasicLoadBalancers records how many managed Basic load balancers the
// migration check found.
func SetBasicLoadBalancers(n int) {
	Register()
	migBasic.Set(float64(n))
}

// CountMigrationStep counts one migration step and its result.
func CountMigrationStep(step string, err error) {
	Register()
	migSteps.WithLabelValues(step, result(err)).Inc()
}

// ObserveMigration records the duration of a migration that removed Basic
// load balancers.
func ObserveMigration(d time.Duration) {
	Register()
	migDuration.Set(d.Seconds())
}

// CountPublicIPUpgrade counts one Basic public IP upgrade and its result.
func CountPublicIPUpgrade(err error) {
	Register()
	migUpgrades.WithLabelValues(result(err)).Inc()
}

func result(err error) string {
	if err != nil {
		return "failure"
	}
	return "success"
}
