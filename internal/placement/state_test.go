package placement

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
)

func TestStateServices(t *testing.T) {
	s := NewState()
	s.AddService("lb-1", "ns/a")
	s.AddService("lb-1", "ns/b")
	s.AddService("lb-2", "ns/c")
	s.AddService("", "ns/ignored")
	s.AddService("lb-2", "")

	if got, ok := s.ServiceConfig("ns/a"); !ok || got != "lb-1" {
		t.Errorf("ServiceConfig(ns/a) = %q, %v", got, ok)
	}
	if _, ok := s.ServiceConfig("ns/ignored"); ok {
		t.Errorf("an empty configuration name was recorded")
	}
	if got, want := s.ServiceCounts(), map[string]int{"lb-1": 2, "lb-2": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("ServiceCounts = %v, want %v", got, want)
	}
	if from := s.MoveService("ns/a", "lb-2"); !reflect.DeepEqual(from, []string{"lb-1"}) {
		t.Errorf("MoveService from = %v, want [lb-1]", from)
	}
	if got, want := s.Services("lb-2"), []string{"ns/a", "ns/c"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Services(lb-2) = %v, want %v", got, want)
	}
	if from := s.MoveService("ns/a", "lb-2"); from != nil {
		t.Errorf("MoveService onto the same LB reported %v", from)
	}
	if !s.RemoveServiceFrom("lb-1", "ns/b") || s.RemoveServiceFrom("lb-1", "ns/b") {
		t.Errorf("RemoveServiceFrom did not report presence correctly")
	}
	if got := s.Services("lb-1"); len(got) != 0 {
		t.Errorf("Services(lb-1) = %v, want empty", got)
	}
	if _, present := s.ServiceCounts()["lb-1"]; present {
		t.Errorf("an emptied configuration still has a count")
	}
	if got := s.RemoveService("ns/c"); !reflect.DeepEqual(got, []string{"lb-2"}) {
		t.Errorf("RemoveService = %v", got)
	}
	if got := s.RemoveService("ns/none"); len(got) != 0 {
		t.Errorf("RemoveService(unknown) = %v", got)
	}
}

func TestStateNodes(t *testing.T) {
	s := NewState()
	s.AddNode("lb-1", "n1")
	s.AddNode("lb-2", "n2")
	s.AddNode("lb-2", "n1") // now on two
	if got := s.NodeConfigs("n1"); !reflect.DeepEqual(got, []string{"lb-1", "lb-2"}) {
		t.Errorf("NodeConfigs(n1) = %v", got)
	}
	if got, ok := s.NodeConfig("n1"); !ok || got != "lb-1" {
		t.Errorf("NodeConfig(n1) = %q, %v; want the first sorted", got, ok)
	}
	if from := s.MoveNode("n1", "lb-3"); !reflect.DeepEqual(from, []string{"lb-1", "lb-2"}) {
		t.Errorf("MoveNode from = %v", from)
	}
	if got, want := s.NodeCounts(), map[string]int{"lb-2": 1, "lb-3": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("NodeCounts = %v, want %v", got, want)
	}
	if !s.RemoveNodeFrom("lb-2", "n2") {
		t.Errorf("RemoveNodeFrom(lb-2, n2) = false")
	}
	if got := s.RemoveNode("n1"); !reflect.DeepEqual(got, []string{"lb-3"}) {
		t.Errorf("RemoveNode = %v", got)
	}
	if got := s.Nodes("lb-3"); len(got) != 0 {
		t.Errorf("Nodes(lb-3) = %v", got)
	}
}

func TestStateRebuild(t *testing.T) {
	s := NewState()
	s.AddService("old", "ns/stale")
	s.AddNode("old", "stale")
	conflicts := s.Rebuild(
		map[string][]string{"lb-1": {"ns/a", "ns/b"}, "lb-2": {"ns/b", "ns/c"}},
		map[string][]string{"lb-1": {"n1", "n2"}, "lb-2": {"n3", "n1"}, "lb-3": nil},
	)
	want := []Conflict{
		{Kind: "service", Name: "ns/b", Configs: []string{"lb-1", "lb-2"}},
		{Kind: "node", Name: "n1", Configs: []string{"lb-1", "lb-2"}},
	}
	if !reflect.DeepEqual(conflicts, want) {
		t.Errorf("conflicts = %+v, want %+v", conflicts, want)
	}
	if _, ok := s.ServiceConfig("ns/stale"); ok {
		t.Errorf("Rebuild kept a Service from before")
	}
	if _, ok := s.NodeConfig("stale"); ok {
		t.Errorf("Rebuild kept a node from before")
	}
	if got, want := s.ServiceCounts(), map[string]int{"lb-1": 2, "lb-2": 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("ServiceCounts = %v, want %v", got, want)
	}
	if got, want := s.NodeCounts(), map[string]int{"lb-1": 2, "lb-2": 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("NodeCounts = %v, want %v", got, want)
	}
	if c := s.Rebuild(nil, nil); c != nil {
		t.Errorf("empty Rebuild conflicts = %v", c)
	}
	if len(s.ServiceCounts())+len(s.NodeCounts()) != 0 {
		t.Errorf("empty Rebuild left entries")
	}
}

// TestStateConcurrent exercises every method from several goroutines; run
// with -race. The final counts must reflect every write.
func TestStateConcurrent(t *testing.T) {
	s := NewState()
	const workers, perWorker = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				key := fmt.Sprintf("ns/w%d-%d", w, i)
				node := fmt.Sprintf("w%d-n%d", w, i)
				s.AddService("lb-1", key)
				s.MoveService(key, "lb-2")
				s.AddNode("lb-1", node)
				_, _ = s.ServiceConfig(key)
				_ = s.NodeCounts()
				_ = s.Services("lb-2")
				if i%2 == 0 {
					s.RemoveService(key)
					s.RemoveNode(node)
				}
			}
		}()
	}
	wg.Wait()
	half := workers * perWorker / 2
	if got := s.ServiceCounts(); got["lb-2"] != half || got["lb-1"] != 0 {
		t.Errorf("ServiceCounts = %v, want lb-2=%d", got, half)
	}
	if got := s.NodeCounts(); got["lb-1"] != half {
		t.Errorf("NodeCounts = %v, want lb-1=%d", got, half)
	}
}
