package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/azlb/azlb/internal/emulator"
)

// throttleFlags are the flags of the emulator's request limits
// (docs/emulator.md, Throttling).
type throttleFlags struct {
	mode                   string
	reads, writes, deletes emulator.Limit
	netWrites, netReads    emulator.Limit
	globalFactor           float64
	budget                 int
	window                 time.Duration
}

// limitValue is a flag.Value for an emulator.Limit.
type limitValue struct{ l *emulator.Limit }

func (v limitValue) String() string {
	if v.l == nil {
		return ""
	}
	return v.l.String()
}

func (v limitValue) Set(s string) error {
	l, err := emulator.ParseLimit(s)
	if err != nil {
		return err
	}
	*v.l = l
	return nil
}

func (f *throttleFlags) register(fs *flag.FlagSet) {
	f.reads, f.writes, f.deletes = emulator.DefaultReadLimit, emulator.DefaultWriteLimit, emulator.DefaultDeleteLimit
	f.netWrites, f.netReads = emulator.DefaultNetworkWriteLimit, emulator.DefaultNetworkReadLimit
	fs.StringVar(&f.mode, "throttle", string(emulator.ThrottleAzure),
		"how ARM requests are limited: azure (Azure Resource Manager's buckets per subscription and principal, the global buckets and Microsoft.Network's limits), write-budget (the former single write bucket per subscription, reads unlimited) or off")
	fs.Var(limitValue{&f.reads}, "throttle-reads", "Azure Resource Manager's read bucket per subscription and principal, BUCKET:COUNT/PERIOD or none (GET and HEAD, polls of long-running operations included)")
	fs.Var(limitValue{&f.writes}, "throttle-writes", "the write bucket (PUT, PATCH, POST), BUCKET:COUNT/PERIOD or none")
	fs.Var(limitValue{&f.deletes}, "throttle-deletes", "the delete bucket (DELETE), BUCKET:COUNT/PERIOD or none")
	fs.Float64Var(&f.globalFactor, "throttle-global-factor", emulator.DefaultGlobalFactor, "the subscription's global buckets (all principals together) are this many times a principal's (0: none)")
	fs.Var(limitValue{&f.netWrites}, "throttle-network-writes", "Microsoft.Network's writes and deletes per subscription, BUCKET:COUNT/PERIOD or none")
	fs.Var(limitValue{&f.netReads}, "throttle-network-reads", "Microsoft.Network's reads per subscription, BUCKET:COUNT/PERIOD or none")
	fs.IntVar(&f.budget, "write-budget", emulator.DefaultWriteBudget, "with --throttle write-budget: writes per window per subscription before 429")
	fs.DurationVar(&f.window, "write-budget-window", emulator.DefaultWriteBudgetWindow, "with --throttle write-budget: refill window of the write budget")
}

// options turns the flags into emulator settings, refusing flags the mode
// does not use (nothing set is ignored).
func (f *throttleFlags) options(fs *flag.FlagSet) (emulator.Options, error) {
	var o emulator.Options
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	mode := emulator.ThrottleMode(f.mode)
	o.Throttle.Mode = mode
	switch mode {
	case emulator.ThrottleAzure, emulator.ThrottleWriteBudget, emulator.ThrottleOff:
	default:
		return o, fmt.Errorf("--throttle %q: want azure, write-budget or off", f.mode)
	}
	azureFlags := []string{"throttle-reads", "throttle-writes", "throttle-deletes", "throttle-global-factor", "throttle-network-writes", "throttle-network-reads"}
	budgetFlags := []string{"write-budget", "write-budget-window"}
	for _, group := range []struct {
		flags []string
		mode  emulator.ThrottleMode
	}{{azureFlags, emulator.ThrottleAzure}, {budgetFlags, emulator.ThrottleWriteBudget}} {
		for _, name := range group.flags {
			if set[name] && mode != group.mode {
				return o, fmt.Errorf("--%s applies to --throttle %s only, not %s", name, group.mode, mode)
			}
		}
	}
	switch mode {
	case emulator.ThrottleAzure:
		o.Throttle.Reads, o.Throttle.Writes, o.Throttle.Deletes = f.reads, f.writes, f.deletes
		o.Throttle.NetworkWrites, o.Throttle.NetworkReads = f.netWrites, f.netReads
		switch {
		case f.globalFactor == 0:
			o.Throttle.GlobalFactor = -1
		case f.globalFactor < 1:
			return o, fmt.Errorf("--throttle-global-factor %s: want at least 1, or 0 for none", strconv.FormatFloat(f.globalFactor, 'g', -1, 64))
		default:
			o.Throttle.GlobalFactor = f.globalFactor
		}
	case emulator.ThrottleWriteBudget:
		if f.budget < 1 {
			return o, fmt.Errorf("--write-budget must be at least 1")
		}
		if f.window <= 0 {
			return o, fmt.Errorf("--write-budget-window must be positive")
		}
		o.WriteBudget, o.WriteBudgetWindow = f.budget, f.window
	}
	return o, nil
}
