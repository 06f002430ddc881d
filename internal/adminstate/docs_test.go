package adminstate

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/azlb/azlb/internal/config"
)

// defaultDrainClaim finds a sentence calling some number of seconds the
// default drain period ("default 30 s drain period", "the default drain
// period of 30 s"), in text whose line breaks are spaces.
var defaultDrainClaim = regexp.MustCompile(`(?i)default,? (\d+) ?s(?:econds?)? drain period|default drain period(?: is| of)? (\d+) ?s`)

// The documentation states the default drain period only as it is
// (issue 37: docs/admin-state.md said TestScaleDownDrain ran with the
// "default 30 s drain period"; the default is 0, the test sets 30 s).
func TestDocsStateTheDefaultDrainPeriod(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("docs: %v (%d files)", err, len(files))
	}
	files = append(files, "../../README.md")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(b)), " ")
		for _, m := range defaultDrainClaim.FindAllStringSubmatch(text, -1) {
			n, _ := strconv.Atoi(m[1] + m[2])
			if n != config.DefaultLoadBalancerBackendPoolDrainPeriodInSeconds {
				t.Errorf("%s: %q: the default drain period (loadBalancerBackendPoolDrainPeriodInSeconds) is %d s", filepath.Base(f), m[0],
					config.DefaultLoadBalancerBackendPoolDrainPeriodInSeconds)
			}
		}
	}
}
