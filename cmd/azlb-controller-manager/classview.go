package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/azlb/azlb/internal/lbclass"
)

// classServices is the Service informer the framework's service controller
// is built with. The framework reconciles the LoadBalancer Services without
// a class, while azlb serves those of its class (--load-balancer-class);
// and it cleans up after any Service with the shared cleanup finalizer
// that is being deleted, whatever its class. So it is shown every Service
// through classView, in its event handlers and its lister alike. The
// shared informer underneath (and what every other reader sees) is
// untouched, and no second watch is opened.
//
// The framework (k8s.io/cloud-provider/controllers/service, v0.37) reads
// Services only through these two: the handlers it registers, and the
// lister's Get. TestClassServicesWithTheFramework runs it through this
// informer.
type classServices struct {
	coreinformers.ServiceInformer
	class lbclass.Class
}

func (s classServices) Informer() cache.SharedIndexInformer {
	return mappedInformer{s.ServiceInformer.Informer(), s.view}
}

func (s classServices) Lister() corelisters.ServiceLister {
	return classLister{s.ServiceInformer.Lister(), s.class}
}

// view maps an informer event's object (a Service or a tombstone of one).
func (s classServices) view(obj any) any {
	switch o := obj.(type) {
	case *v1.Service:
		return classView(s.class, o)
	case cache.DeletedFinalStateUnknown:
		if svc, ok := o.Obj.(*v1.Service); ok {
			o.Obj = classView(s.class, svc)
		}
		return o
	}
	return obj
}

// classView is svc as the framework's service controller is to see it when
// azlb serves class c (the zero Class: no class):
//
//   - a Service of class c (azlb's, lbclass.Class.Owns) without its class,
//     so that the framework ensures its load balancer, adds and removes the
//     cleanup finalizer and writes its status as for any Service. Its
//     patches are the difference between this view and a modified copy of
//     it, so they never mention the class;
//   - any other LoadBalancer Service (class-less, or of another class) is
//     another implementation's: shown as a ClusterIP Service without
//     finalizers and load balancer status, which the framework neither
//     ensures, nor cleans up, nor patches. Such a Service cannot have been
//     azlb's (a LoadBalancer Service's class cannot change) unless the
//     informer missed it leaving LoadBalancer in between; then the
//     framework, which saw it as azlb's, still deletes what azlb has for it,
//     and writes nothing to the Service, now another implementation's;
//   - a Service that is not a LoadBalancer as it is. The API server wipes
//     the class when a Service stops being a LoadBalancer, so a former
//     Service of azlb's cannot be told apart from anyone else's: with the
//     cleanup finalizer the framework asks the cloud for the Service's load
//     balancer (azlb finds only its own frontends and public IPs), deletes
//     it if there is one, and removes the finalizer, as the framework of
//     every other cloud controller manager does.
//
// The view is a shallow copy (the framework copies a Service before it
// modifies it); svc itself is never changed.
func classView(c lbclass.Class, svc *v1.Service) *v1.Service {
	switch {
	case c.Owns(svc) && svc.Spec.LoadBalancerClass == nil:
		return svc
	case c.Owns(svc):
		v := *svc
		v.Spec.LoadBalancerClass = nil
		return &v
	case svc.Spec.Type == v1.ServiceTypeLoadBalancer:
		v := *svc
		v.Spec.Type = v1.ServiceTypeClusterIP
		v.Finalizers = nil
		v.Status.LoadBalancer = v1.LoadBalancerStatus{}
		return &v
	default:
		return svc
	}
}

// classLister is a Service lister whose Services are seen through
// classView.
type classLister struct {
	inner corelisters.ServiceLister
	class lbclass.Class
}

func (l classLister) List(selector labels.Selector) ([]*v1.Service, error) {
	svcs, err := l.inner.List(selector)
	return viewAll(l.class, svcs), err
}

func (l classLister) Services(namespace string) corelisters.ServiceNamespaceLister {
	return classNamespaceLister{l.inner.Services(namespace), l.class}
}

type classNamespaceLister struct {
	inner corelisters.ServiceNamespaceLister
	class lbclass.Class
}

func (l classNamespaceLister) List(selector labels.Selector) ([]*v1.Service, error) {
	svcs, err := l.inner.List(selector)
	return viewAll(l.class, svcs), err
}

func (l classNamespaceLister) Get(name string) (*v1.Service, error) {
	svc, err := l.inner.Get(name)
	if err != nil {
		return nil, err
	}
	return classView(l.class, svc), nil
}

func viewAll(c lbclass.Class, svcs []*v1.Service) []*v1.Service {
	out := make([]*v1.Service, len(svcs))
	for i, s := range svcs {
		out[i] = classView(c, s)
	}
	return out
}
