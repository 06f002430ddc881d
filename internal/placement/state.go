package placement

import (
	"sort"
	"sync"
)

// State is the bookkeeping of which Services and nodes are on which load
// balancer configuration: ActiveServices (configuration name -> Service keys)
// and ActiveNodes (configuration name -> node names).
//
// State is safe for concurrent use: every method locks an internal mutex.
// Compound sequences (look up Current, place, record) are not atomic; the
// caller serialises work per Service and per node, which the controller
// work queues already guarantee.
//
// Configuration names are stored exactly as given: record the names Placer
// returns (PlaceService, PlaceNode, ConfigName, ConfigForLoadBalancer), not
// raw Azure names whose case may differ. Empty names and keys are ignored.
//
// An object normally sits on one configuration. Rebuild may observe one on
// several (for example after a crash in the middle of a move); all are kept
// and reported as Conflicts so the caller can clean up, and the lookup
// methods return the first in sorted order.
type State struct {
	mu       sync.RWMutex
	services membership
	nodes    membership
}

// Conflict is an object observed on more than one configuration.
type Conflict struct {
	// Kind is "service" or "node".
	Kind string
	// Name is the Service key or node name.
	Name string
	// Configs are the configurations it was found on, sorted.
	Configs []string
}

// NewState returns an empty State.
func NewState() *State {
	return &State{services: newMembership(), nodes: newMembership()}
}

// Rebuild replaces the whole state with what was observed in Azure:
// services maps configuration name to the Service keys found on its load
// balancers' frontends, nodes maps configuration name to the node names found
// in its cluster backend pool. Objects found on more than one configuration
// are returned as conflicts, services first, each sorted by name.
func (s *State) Rebuild(services, nodes map[string][]string) []Conflict {
	sm, nm := newMembership(), newMembership()
	for cfg, keys := range services {
		for _, k := range keys {
			sm.add(cfg, k)
		}
	}
	for cfg, names := range nodes {
		for _, n := range names {
			nm.add(cfg, n)
		}
	}
	s.mu.Lock()
	s.services, s.nodes = sm, nm
	s.mu.Unlock()
	return append(sm.conflicts("service"), nm.conflicts("node")...)
}

// AddService records key on config, leaving any other membership alone.
func (s *State) AddService(config, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.services.add(config, key)
}

// RemoveService forgets key everywhere and returns the configurations it was
// on, sorted.
func (s *State) RemoveService(key string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.services.removeAll(key)
}

// RemoveServiceFrom forgets key on config only; it reports whether key was
// there.
func (s *State) RemoveServiceFrom(config, key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.services.remove(config, key)
}

// MoveService records key on to only, and returns the other configurations
// it was on before, sorted.
func (s *State) MoveService(key, to string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.services.move(key, to)
}

// ServiceConfig returns the configuration key is on (the first, sorted, if
// several) and whether it is on any. Use it as ServiceInfo.Current.
func (s *State) ServiceConfig(key string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.services.first(key)
}

// ServiceConfigs returns every configuration key is on, sorted.
func (s *State) ServiceConfigs(key string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.services.configsOf(key)
}

// Services returns the Service keys on config, sorted.
func (s *State) Services(config string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.services.members(config)
}

// ServiceCounts returns the number of Services per configuration. It is not
// a rule count: PlaceService balances on rules, which the caller counts on
// the load balancers themselves.
func (s *State) ServiceCounts() map[string]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.services.counts()
}

// AddNode records node on config, leaving any other membership alone.
func (s *State) AddNode(config, node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodes.add(config, node)
}

// RemoveNode forgets node everywhere and returns the configurations it was
// on, sorted.
func (s *State) RemoveNode(node string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes.removeAll(node)
}

// RemoveNodeFrom forgets node on config only; it reports whether node was
// there.
func (s *State) RemoveNodeFrom(config, node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes.remove(config, node)
}

// MoveNode records node on to only, and returns the other configurations it
// was on before, sorted.
func (s *State) MoveNode(node, to string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes.move(node, to)
}

// NodeConfig returns the configuration node is on (the first, sorted, if
// several) and whether it is on any. Use it as NodeInfo.Current.
func (s *State) NodeConfig(node string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nodes.first(node)
}

// NodeConfigs returns every configuration node is on, sorted.
func (s *State) NodeConfigs(node string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nodes.configsOf(node)
}

// Nodes returns the node names on config, sorted.
func (s *State) Nodes(config string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nodes.members(config)
}

// NodeCounts returns the number of nodes per configuration, the nodeCounts
// argument of PlaceNode.
func (s *State) NodeCounts() map[string]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nodes.counts()
}

// membership is a two-way many-to-many index; not locked.
type membership struct {
	byConfig map[string]map[string]struct{}
	byMember map[string]map[string]struct{}
}

func newMembership() membership {
	return membership{byConfig: map[string]map[string]struct{}{}, byMember: map[string]map[string]struct{}{}}
}

func addTo(m map[string]map[string]struct{}, k, v string) {
	set, ok := m[k]
	if !ok {
		set = map[string]struct{}{}
		m[k] = set
	}
	set[v] = struct{}{}
}

func removeFrom(m map[string]map[string]struct{}, k, v string) bool {
	set, ok := m[k]
	if !ok {
		return false
	}
	if _, ok := set[v]; !ok {
		return false
	}
	delete(set, v)
	if len(set) == 0 {
		delete(m, k)
	}
	return true
}

func sortedKeys(set map[string]struct{}) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (m membership) add(config, member string) {
	if config == "" || member == "" {
		return
	}
	addTo(m.byConfig, config, member)
	addTo(m.byMember, member, config)
}

func (m membership) remove(config, member string) bool {
	removeFrom(m.byMember, member, config)
	return removeFrom(m.byConfig, config, member)
}

func (m membership) removeAll(member string) []string {
	configs := sortedKeys(m.byMember[member])
	for _, c := range configs {
		m.remove(c, member)
	}
	return configs
}

func (m membership) move(member, to string) []string {
	if member == "" || to == "" {
		return nil
	}
	var others []string
	for _, c := range m.removeAll(member) {
		if c != to {
			others = append(others, c)
		}
	}
	m.add(to, member)
	return others
}

func (m membership) first(member string) (string, bool) {
	configs := sortedKeys(m.byMember[member])
	if len(configs) == 0 {
		return "", false
	}
	return configs[0], true
}

func (m membership) configsOf(member string) []string { return sortedKeys(m.byMember[member]) }

func (m membership) members(config string) []string { return sortedKeys(m.byConfig[config]) }

func (m membership) counts() map[string]int {
	out := make(map[string]int, len(m.byConfig))
	for c, set := range m.byConfig {
		out[c] = len(set)
	}
	return out
}

func (m membership) conflicts(kind string) []Conflict {
	var out []Conflict
	for _, member := range sortedKeys(keySet(m.byMember)) {
		if configs := m.byMember[member]; len(configs) > 1 {
			out = append(out, Conflict{Kind: kind, Name: member, Configs: sortedKeys(configs)})
		}
	}
	return out
}

func keySet(m map[string]map[string]struct{}) map[string]struct{} {
	out := make(map[string]struct{}, len(m))
	for k := range m {
		out[k] = struct{}{}
	}
	return out
}
