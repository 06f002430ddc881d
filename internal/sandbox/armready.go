package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/emulator"
)

// verifyUserAgent starts the User-Agent of azlb verify's calls
// (internal/verify.UserAgent): they are not the controller's.
const verifyUserAgent = "azlb-verify"

// A restarted controller that serves /healthz may still reach nothing in
// Azure: with a wrong aadClientSecret every token request is refused and
// every ARM call with it. RestartController therefore also waits for the
// controller's first ARM call the emulator answered with success
// (waitFirstARMCall), and fails with the controller's log line saying why
// when Azure AD refuses its credential (which no retry heals) or when the
// deadline passes.

// armPollInterval is how often the emulator's request log is read.
const armPollInterval = 250 * time.Millisecond

// waitFirstARMCall waits until the emulator of azure.json (azureJSON) has
// answered an ARM call of the controller with success since since (a call
// of azlb verify does not count); it fails at once when the emulator's
// Azure AD has refused a token request since then with 401 (a wrong
// secret: the controller would fail every call), and at deadline.
func waitFirstARMCall(ctx context.Context, azureJSON, logPath string, since, deadline time.Time) error {
	cfg, err := config.LoadFile(azureJSON)
	if err != nil {
		return fmt.Errorf("%s: %w", azureJSON, err)
	}
	ctl, err := newEmulatorControl(cfg.ResourceManagerEndpoint, cfg.CACertFile)
	if err != nil {
		return err
	}
	defer ctl.close()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	tick := time.NewTicker(armPollInterval)
	defer tick.Stop()
	var lastErr error
	for {
		var recs []emulator.RequestRecord
		err := ctl.call(ctx, "GET", "/requests?since="+url.QueryEscape(since.UTC().Format(time.RFC3339Nano)), nil, &recs)
		lastErr = err
		for _, r := range recs {
			switch {
			case strings.HasPrefix(r.UserAgent, verifyUserAgent):
			case r.Kind == "arm" && r.Status >= 200 && r.Status < 300:
				return nil
			case r.Kind == "aad" && r.Status == 401:
				return fmt.Errorf("azlb-controller-manager serves /healthz but Azure AD refuses its credential (azure.json aadClientId/aadClientSecret), so every ARM call fails (log: %s); its log says:\n%s",
					logPath, lastLogLine(logPath, "AADSTS"))
			}
		}
		select {
		case <-ctx.Done():
			why := "no ARM call of it succeeded"
			if lastErr != nil {
				why += fmt.Sprintf(" (the emulator's request log: %v)", lastErr)
			}
			return fmt.Errorf("azlb-controller-manager serves /healthz, but %s by %s; it is left running (log: %s); its last log entry:\n%s",
				why, deadline.Format(time.TimeOnly), logPath, lastLogEntry(logPath))
		case <-tick.C:
		}
	}
}

// lastLogLine is the last line of the log holding word, or its last entry
// when none does.
func lastLogLine(path, word string) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer f.Close()
	found := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), word) {
			found = sc.Text()
		}
	}
	if found == "" {
		return lastLogEntry(path)
	}
	return found
}
