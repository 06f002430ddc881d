// Package securitygroup is the only code that writes the network security
// group (NSG) named in azure.json: the inbound rules of LoadBalancer
// Services, laid out as docs/security-groups.md describes (and as the Azure
// cloud provider lays them out, so a cluster taken over from it keeps its
// rules).
//
// Contract:
//
//   - One writer. Callers queue Edits (Update); the goroutine running Run
//     carries them out in rounds: a round takes every queued edit (after
//     waiting GatherWindow for more, MaxGather at most), reads
//     the NSG once, applies the edits one after another to azlb's rules and
//     writes the NSG once, with If-Match, only when a rule (or, with
//     Options.Tags, a tag: azure.json tags) changed. Edits
//     queued while a round runs share the next one. A 412 or 409 is retried
//     with a fresh read up to MaxConflictRetries times. Nothing is written
//     while Run is not running.
//   - Ownership. A rule is azlb's when its name starts with RulePrefix and
//     its priority is in [MinPriority, MaxPriority]; every other rule, and
//     everything else about the NSG but the tags Options.Tags asks for, is
//     sent back as it was read.
//   - Never launder. A rule under one of azlb's names whose content is not
//     what azlb writes under that name (an allow rule whose protocol,
//     sources or ports no longer hash to its name, a destination that is
//     not an address, an outbound rule, a deny-all that does not deny
//     everything) is rewritten to what its name stands for (known when
//     the writer saw it well-formed before) or removed by the next round
//     that writes, whatever its edits; its destinations never move to the
//     rule named after its new content. Result.Repaired names them.
//   - Check applies an edit to the last copy without writing (Azure's
//     limits); Edit.Narrow keeps a refused Service's destinations only in
//     the rules whose sources its settings still allow; Edit.Drop takes
//     addresses out of every rule whatever Narrow says.
//   - An Edit releases the Service's old destinations from every rule, then
//     adds its allows and deny: rules hold (family, protocol, sources,
//     ports) and the destinations that need them; a rule left without
//     destinations is dropped; new allow rules take the lowest free
//     priority from 500, deny-all rules the highest free one from 4095.
//   - Limits. An edit that would take the NSG over Azure's limits (1,000
//     rules, 4,000 source and 4,000 destination prefixes) or out of
//     priorities fails alone with a *LimitError; the other edits of the
//     round are written.
//   - Collect removes destinations that are no longer live from azlb's
//     rules (a Service deleted while no controller ran).
package securitygroup
