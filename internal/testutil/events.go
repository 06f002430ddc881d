package testutil

import (
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// Event is one recorded event.
type Event struct {
	// Object is the name (namespace/name for namespaced objects) of the
	// object the event is about.
	Object, Type, Reason, Message string
	At                            time.Time
}

// String is "object type reason: message".
func (e Event) String() string {
	return fmt.Sprintf("%s %s %s: %s", e.Object, e.Type, e.Reason, e.Message)
}

// EventLog is a concurrency-safe record.EventRecorder that keeps every
// event.
type EventLog struct {
	mu     sync.Mutex
	events []Event
	// Notify, when set before use, is called with every event, outside the
	// log's lock.
	Notify func(Event)
}

var _ record.EventRecorder = (*EventLog)(nil)

// Event records an event.
func (l *EventLog) Event(obj runtime.Object, typ, reason, msg string) {
	name := ""
	if m, ok := obj.(metav1.Object); ok {
		name = m.GetName()
		if ns := m.GetNamespace(); ns != "" {
			name = ns + "/" + name
		}
	} else if r, ok := obj.(*v1.ObjectReference); ok {
		name = r.Name
		if r.Namespace != "" {
			name = r.Namespace + "/" + name
		}
	}
	e := Event{Object: name, Type: typ, Reason: reason, Message: msg, At: time.Now()}
	l.mu.Lock()
	l.events = append(l.events, e)
	n := l.Notify
	l.mu.Unlock()
	if n != nil {
		n(e)
	}
}

// Eventf records an event with a formatted message.
func (l *EventLog) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	l.Event(obj, typ, reason, fmt.Sprintf(format, args...))
}

// AnnotatedEventf records an event; annotations are dropped.
func (l *EventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	l.Eventf(obj, typ, reason, format, args...)
}

// All returns every event so far.
func (l *EventLog) All() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

// Find returns the events about object with the reason ("" matches any).
func (l *EventLog) Find(object, reason string) []Event {
	var out []Event
	for _, e := range l.All() {
		if (object == "" || e.Object == object) && (reason == "" || e.Reason == reason) {
			out = append(out, e)
		}
	}
	return out
}

// Take returns the events so far and forgets them.
func (l *EventLog) Take() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// Count counts the events with the reason, about any object.
func (l *EventLog) Count(reason string) int { return len(l.Find("", reason)) }

// Messages returns the messages of the events about object with the reason.
func (l *EventLog) Messages(object, reason string) []string {
	var out []string
	for _, e := range l.Find(object, reason) {
		out = append(out, e.Message)
	}
	return out
}

// Times returns when the events about object with the reason were recorded.
func (l *EventLog) Times(object, reason string) []time.Time {
	var out []time.Time
	for _, e := range l.Find(object, reason) {
		out = append(out, e.At)
	}
	return out
}
