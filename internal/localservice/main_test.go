package localservice

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	// The updater logs every retry and failure; keep test output readable
	// (set AZLB_TEST_LOGS=1 to see them).
	if os.Getenv("AZLB_TEST_LOGS") == "" {
		klog.SetLogger(logr.Discard())
	}
	goleak.VerifyTestMain(m)
}
