package verify

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Finding is one difference between Azure and the documented behaviour (or,
// in Report.Skipped, one object verify did not judge and why).
type Finding struct {
	// Object names what the finding is about: "service ns/name", "node n",
	// "load balancer lb", "public IP p", "service gateway g".
	Object string
	// Message says what Azure holds and what it should hold.
	Message string
	// Doc is the documentation page (under docs/) that says so.
	Doc string
}

func (f Finding) String() string {
	if f.Doc == "" {
		return f.Object + ": " + f.Message
	}
	return f.Object + ": " + f.Message + " [docs/" + f.Doc + "]"
}

// Report is the outcome of Check.
type Report struct {
	// Mode is "IP-based pools", "NIC-based pools" or "pod-based".
	Mode     string
	Findings []Finding
	Skipped  []Finding
	// Warnings do not make the report unclean: azure.json fields azlb
	// ignored (config.UnknownFieldWarnings), a likely misspelt setting.
	Warnings []string
	// What was looked at.
	Services, Nodes, LoadBalancers, PublicIPs int
	// SecurityGroup names the network security group judged ("none
	// configured": no NSG checks; "": not applicable, pod-based), and
	// SecurityRules counts azlb's rules in it.
	SecurityGroup string
	SecurityRules int
}

// Clean reports whether Azure matches the documented behaviour.
func (r *Report) Clean() bool { return len(r.Findings) == 0 }

func (r *Report) add(object, doc, format string, args ...any) {
	r.Findings = append(r.Findings, Finding{Object: object, Message: fmt.Sprintf(format, args...), Doc: doc})
}

func (r *Report) skip(object, format string, args ...any) {
	r.Skipped = append(r.Skipped, Finding{Object: object, Message: fmt.Sprintf(format, args...)})
}

func (r *Report) sort() {
	by := func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Object, b.Object), cmp.Compare(a.Message, b.Message))
	}
	slices.SortFunc(r.Findings, by)
	slices.SortFunc(r.Skipped, by)
}

// Write prints the report for a terminal: one line per finding (DRIFT),
// one per object not judged (SKIP), and the summary line.
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString("DRIFT " + f.String() + "\n")
	}
	for _, f := range r.Skipped {
		b.WriteString("SKIP  " + f.String() + "\n")
	}
	for _, w := range r.Warnings {
		b.WriteString("WARN  azure.json: " + w + "\n")
	}
	b.WriteString(r.Summary() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary is one line: the verdict and what was looked at.
func (r *Report) Summary() string {
	verdict := "clean: Azure holds what the documentation says"
	if !r.Clean() {
		verdict = fmt.Sprintf("%d difference(s) from the documented behaviour", len(r.Findings))
	}
	s := fmt.Sprintf("azlb verify (%s): %s; checked %d Services, %d nodes, %d load balancers, %d public IPs",
		r.Mode, verdict, r.Services, r.Nodes, r.LoadBalancers, r.PublicIPs)
	switch r.SecurityGroup {
	case "":
	case "none configured":
		s += ", no security group (none configured)"
	default:
		s += fmt.Sprintf(", security group %s (%d azlb rules)", r.SecurityGroup, r.SecurityRules)
	}
	if len(r.Skipped) > 0 {
		s += fmt.Sprintf("; %d skipped", len(r.Skipped))
	}
	if len(r.Warnings) > 0 {
		s += fmt.Sprintf("; %d warning(s)", len(r.Warnings))
	}
	return s
}
