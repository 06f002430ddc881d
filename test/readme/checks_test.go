package readme

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// check is what README.md says a step does.
type check struct {
	// timeout bounds one run of the command (default 2 minutes).
	timeout time.Duration
	// eventually re-runs the command, a second apart, until ok passes,
	// for at most this long (0: it must pass at once). The README says
	// "within ..." where this is more than a few seconds.
	eventually time.Duration
	// repeat runs it this many more times once it passed; each must pass
	// (for "never", "every time" and results that vary).
	repeat int
	ok     func(p *play, r Result) error
}

// The checks, keyed by the README line (Step.Key: command and comment with
// blanks collapsed).
var checks = map[string]check{
	// --- the default sandbox (SANDBOX=multi)
	`make sandbox # ... "sandbox ready": every demo Service answers`: {timeout: 10 * time.Minute,
		ok: all(exit0, outHas("sandbox ready", "service demo/web answers on", "service demo/restricted answers on", "service demo/echo answers on"))},
	`export KUBECONFIG=.sandbox/kubeconfig`:                                                                   {ok: exit0},
	`bin/kubectl get svc -n demo # external IPs allocated by the emulated Azure (127.64.x.x)`:                 {ok: all(exit0, servicesWithIPs("web", "api", "restricted", "echo", "echo-tcp"))},
	`WEB=$(bin/kubectl get svc -n demo web -o jsonpath='{.status.loadBalancer.ingress[0].ip}')`:               {ok: all(exit0, varIsIP("WEB"))},
	`ECHO=$(bin/kubectl get svc -n demo echo -o jsonpath='{.status.loadBalancer.ingress[0].ip}')`:             {ok: all(exit0, varIsIP("ECHO"))},
	`RESTRICTED=$(bin/kubectl get svc -n demo restricted -o jsonpath='{.status.loadBalancer.ingress[0].ip}')`: {ok: all(exit0, varIsIP("RESTRICTED"))},
	`curl http://$WEB/ # the "web" Service: the name of the node that served it (aks-pool1-*)`: {repeat: 9,
		ok: all(exit0, answeredBy("aks-pool1-0", "aks-pool1-1", "aks-pool1-2"))},
	`echo hi | nc -u -w1 $ECHO 53 # the "echo" Service (UDP): "aks-pool2-0 hi", the node that answered and your datagram`: {repeat: 4,
		ok: all(exit0, outMatches(`^aks-pool2-[01] hi\n?$`))},
	`curl http://$ECHO:53/ # "echo-tcp" (TCP 53) shares echo's public IP (azure-pip-name sandbox-dns-ip): it answers too`: {repeat: 4,
		ok: all(exit0, answeredBy("aks-pool2-0", "aks-pool2-1"))},
	`curl --interface 127.0.0.2 http://$RESTRICTED/ # answers: loadBalancerSourceRanges is 127.0.0.2/32`: {repeat: 4,
		ok: all(exit0, answeredBy("aks-pool1-0", "aks-pool1-1", "aks-pool1-2"))},
	`curl http://$RESTRICTED/ # reset: a plain curl comes from 127.0.0.1, which the NSG denies`: {repeat: 2,
		ok: all(exitNot0, errHasAny("Couldn't connect to server", "reset by peer"))},
	`curl http://127.230.0.4/ # "private", an internal Service published through a Private Link Service, via a private endpoint in a second virtual network`: {repeat: 2,
		ok: all(exit0, answeredBy("aks-pool1-0", "aks-pool1-1", "aks-pool1-2"))},
	`bin/azlb status # load balancers, frontends, rules, sources, pools, admin state, Private Link Services`: {
		ok: all(exit0, outHas("LOAD BALANCER kubernetes", "LOAD BALANCER lb-pool2", "demo/web", "demo/restricted", "127.0.0.2/32", "POOL demo.api", "PRIVATE LINK SERVICE"),
			outMatches(`demo/echo(-tcp)?\+demo/echo(-tcp)? \(shared\)`))},
	`bin/azlb verify # every difference from the documented behaviour; exit 1 on drift ("clean" here)`: {eventually: time.Minute,
		ok: all(exit0, outHas("clean"))},
	`bin/kubectl taint node aks-pool1-1 node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`: {ok: exit0},
	`curl http://$WEB/ # never aks-pool1-1 any more (AdminState Down)`: {eventually: 10 * time.Second, repeat: 19,
		ok: all(exit0, answeredBy("aks-pool1-0", "aks-pool1-2"))},
	`make sandbox-down # stop everything`: {ok: all(exit0, nothingLeft)},

	// --- SANDBOX=nic
	`make sandbox SANDBOX=nic # ... "the 5 VMs are members of the NIC-based pool"`: {timeout: 10 * time.Minute,
		ok: all(exit0, outHas("the 5 VMs are members of the NIC-based pool", "sandbox ready"))},
	`bin/azlb status # POOL kubernetes (NIC-based): the 5 nodes' ip configurations, AdminState None`: {
		ok: all(exit0, outHas("POOL kubernetes", "NIC-based"), adminStates(map[string]string{"aks-nic-000000": "None", "aks-nic-000001": "None", "aks-nic-000002": "None", "aks-as-0": "None", "aks-as-1": "None"}))},
	`bin/azlb vm deallocate aks-nic-000001 # the VM stops; its node turns NotReady and gets the shutdown taint`: {ok: exit0},
	`bin/azlb status # within a minute: aks-nic-000001 Down`:                                                    {eventually: 90 * time.Second, ok: all(exit0, adminStates(map[string]string{"aks-nic-000001": "Down", "aks-nic-000000": "None"}))},
	`bin/azlb vm start aks-nic-000001 # the VM runs again`:                                                      {ok: exit0},
	`bin/azlb status # within a minute: aks-nic-000001 None again`:                                              {eventually: 90 * time.Second, ok: all(exit0, adminStates(map[string]string{"aks-nic-000001": "None"}))},
	`bin/azlb verify # "clean"`:                                                                                 {eventually: time.Minute, ok: all(exit0, outHas("clean"))},

	// --- SANDBOX=container
	`make sandbox SANDBOX=container # ... "sandbox ready": the pods in the gateway, team-a's egress set up`: {timeout: 10 * time.Minute,
		ok: all(exit0, outHas("service gateway holds the 5 demo pods", "egress identity team-a set up", "sandbox ready"))},
	`bin/azlb status # each Service's own load balancer; the gateway's pods per node; EGRESS IDENTITY team-a`: {
		ok: all(exit0, outHas("(demo/web)", "(demo/api)", "SERVICE GATEWAY", "node aks-nodepool1-0", "10.244.0.10", "EGRESS IDENTITY", "team-a"))},
	`bin/azlb sandbox egress-curl egress-client # a loopback server it starts prints what it sees:`: {
		ok: all(exit0, outMatches(`^source address: 127\.64\.0\.4\n`))},
	`python3 -m http.server --bind 127.0.0.1 9000 & # or any loopback server of yours: its log shows 127.64.0.4`: {
		ok: all(exit0, listening("127.0.0.1:9000"))},
	`bin/azlb sandbox egress-curl demo/egress-client http://127.0.0.1:9000/ # the server's directory listing, from 127.64.0.4`: {
		ok: all(exit0, outHas("Directory listing"), earlierErrHas(`python3 -m http.server --bind 127.0.0.1 9000 & # or any loopback server of yours: its log shows 127.64.0.4`, "127.64.0.4"))},
	`bin/kubectl -n demo delete pod egress-client # the last pod of team-a: the identity is torn down`: {timeout: time.Minute,
		ok: all(exit0, outHas(`pod "egress-client" deleted`))},
	`bin/azlb status # no EGRESS IDENTITY any more; default-natgw stays`: {eventually: 30 * time.Second,
		ok: all(exit0, outHas("default-natgw"), outLacks("EGRESS IDENTITY"))},
	`kill %1 # stop the python3 server`: {ok: exit0},

	// --- SANDBOX=basic
	`make sandbox SANDBOX=basic # ... "refused to start, as it must with loadBalancerSku basic"`: {timeout: 10 * time.Minute,
		ok: all(exit0, outHas("refused to start, as it must with loadBalancerSku basic"))},
	`bin/kubectl get svc -n demo # the IPs the Basic load balancers gave the Services`: {ok: all(exit0, recordServiceIPs)},
	`bin/azlb status # load balancers kubernetes and kubernetes-internal, SKU Basic`: {
		ok: all(exit0, outHas("LOAD BALANCER kubernetes ", "LOAD BALANCER kubernetes-internal", "SKU Basic"))},
	`sed -i 's/"loadBalancerSku": "basic"/"loadBalancerSku": "standard"/' .sandbox/azure.json`: {ok: all(exit0, fileHas(".sandbox/azure.json", `"loadBalancerSku": "standard"`))},
	`bin/azlb sandbox restart # the controller starts and migrates to Standard`:                {ok: all(exit0, outHas("restarted and serving"))},
	`bin/azlb status # within a minute: SKU Standard, the nodes in their pools`: {eventually: 90 * time.Second,
		ok: all(exit0, outHas("SKU Standard"), outLacks("SKU Basic"))},
	`bin/kubectl get svc -n demo # the same IPs`: {ok: all(exit0, sameServiceIPs)},
	`bin/kubectl get events -n demo # BasicLoadBalancerMigration, PublicIPMadeStatic, PublicIPUpgraded`: {eventually: 30 * time.Second,
		ok: all(exit0, outHas("BasicLoadBalancerMigration", "PublicIPMadeStatic", "PublicIPUpgraded"))},

	// --- SANDBOX=nodes (played by make test-k8s-e2e: AZLB_README_NODES)
	`make sandbox SANDBOX=nodes # ... "sandbox ready": 3 real nodes, demo/web answers through the emulated load balancer`: {timeout: 20 * time.Minute,
		ok: all(exit0, outHas("3 nodes Ready", "initialized the nodes", "service demo/web answers on", "sandbox ready"))},
	`bin/kubectl get nodes # aks-nodepool1-0 to 2, Ready (azlb initialized them from their emulated VMs)`: {
		ok: all(exit0, outMatches(`(?m)^aks-nodepool1-0\s+Ready\s`), outMatches(`(?m)^aks-nodepool1-1\s+Ready\s`), outMatches(`(?m)^aks-nodepool1-2\s+Ready\s`))},
	`WEB=$(bin/kubectl get svc -n demo web -o jsonpath='{.status.loadBalancer.ingress[0].ip}') # 198.18.0.1: the cluster's emulated public addresses`: {
		ok: all(exit0, varMatches("WEB", `^198\.18\.\d+\.\d+$`))},
	`curl http://$WEB/clientip # your address and port as the pod saw them (externalTrafficPolicy Local): 198.19.0.1:PORT`: {repeat: 2,
		ok: all(exit0, outMatches(`^198\.19\.\d+\.1:\d+\n?$`))},
	`bin/kubectl -n demo scale deploy web --replicas=1 # two nodes are left without a pod: their health probes fail (every 5 s, 2 in a row)`: {ok: all(exit0, outHas("scaled"))},
	`sleep 20 # until the load balancer has taken them out`:                                                                                  {ok: exit0},
	`curl -m 2 http://$WEB/hostname # within a minute, every time: the one pod left (new connections go to its node only)`: {eventually: time.Minute, repeat: 19,
		ok: all(exit0, outMatches(`^web-[a-z0-9]+-[a-z0-9]+\n?$`))},
	`bin/azlb status # demo/web's frontend and rule, the 3 nodes in the pool`: {
		ok: all(exit0, outHas("LOAD BALANCER kubernetes", "demo/web", "TCP/80->80", "aks-nodepool1-0", "aks-nodepool1-1", "aks-nodepool1-2"))},

	// --- docs/install.md: the black-box suite against the sandbox
	`make test-e2e-cluster # every scenario passes; its namespace and Azure objects are gone afterwards`: {timeout: 20 * time.Minute,
		ok: all(exit0, outHas("--- PASS: TestCluster", "--- PASS: TestCluster/verify", "--- PASS: TestCluster/admin_state_taint"), outLacks("--- SKIP"), noNamespaceLeft)},

	// --- the drain period (default sandbox)
	`make sandbox # ... "sandbox ready"`: {timeout: 10 * time.Minute, ok: all(exit0, outHas("sandbox ready"))},
	`bin/azlb sandbox register-feature Microsoft.Network/SLBAllowConnectionDraining # Registering, Registered, then in effect`: {
		ok: all(exit0, outHas("Registering", "Registered", "in effect"))},
	`sed -i 's/"loadBalancerSku": "standard"/&, "loadBalancerBackendPoolDrainPeriodInSeconds": 20/' .sandbox/azure.json`: {
		ok: all(exit0, fileHas(".sandbox/azure.json", `"loadBalancerBackendPoolDrainPeriodInSeconds": 20`))},
	`bin/azlb sandbox restart # the controller gives the pools it owns a 20 s drain period`: {
		ok: all(exit0, outHas("restarted and serving"), eventuallyStatusHas(time.Minute, "drain 20s"))},
	`curl -s --rate 2/s "http://$WEB/?[1-120]" > held.txt & # 120 requests on one connection, 2 a second`: {ok: all(exit0, markTime("held"))},
	`sleep 2; NODE=$(head -1 held.txt); echo $NODE # the node that connection reached`: {
		ok: all(exit0, outMatches(`^aks-pool1-[012]\n$`))},
	`bin/kubectl taint node $NODE ToBeDeletedByClusterAutoscaler=1:NoSchedule # Down: no new connections to $NODE`: {ok: exit0},
	`curl http://$WEB/ # never $NODE`: {eventually: 10 * time.Second, repeat: 19, ok: all(exit0, notAnsweredByVar("NODE"))},
	`bin/kubectl wait --for=condition=LoadBalancerDrained node/$NODE --timeout=1m # met 20 s after Down`: {timeout: 2 * time.Minute,
		ok: all(exit0, outHas("condition met"), tookAtLeast(15*time.Second))},
	`bin/kubectl delete node $NODE # $NODE leaves the pools: its held connection has 20 s left`: {ok: all(exit0, markTime("deleted"))},
	`wait; uniq -c held.txt # $NODE answered until 20 s after its deletion; curl then reconnected to another node`: {timeout: 2 * time.Minute,
		ok: all(exit0, heldThenReconnected)},
}

type okFunc = func(p *play, r Result) error

func all(fs ...okFunc) okFunc {
	return func(p *play, r Result) error {
		for _, f := range fs {
			if err := f(p, r); err != nil {
				return err
			}
		}
		return nil
	}
}

func exit0(_ *play, r Result) error {
	if r.Code != 0 {
		return fmt.Errorf("exit status %d, want 0", r.Code)
	}
	return nil
}

func exitNot0(_ *play, r Result) error {
	if r.Code == 0 {
		return errors.New("exit status 0, want a failure")
	}
	return nil
}

func outHas(want ...string) okFunc {
	return func(_ *play, r Result) error {
		for _, w := range want {
			if !strings.Contains(r.Stdout, w) {
				return fmt.Errorf("the output lacks %q", w)
			}
		}
		return nil
	}
}

func outLacks(bad string) okFunc {
	return func(_ *play, r Result) error {
		if strings.Contains(r.Stdout, bad) {
			return fmt.Errorf("the output has %q", bad)
		}
		return nil
	}
}

// errHasAny: the error output says one of these.
func errHasAny(want ...string) okFunc {
	return func(_ *play, r Result) error {
		for _, w := range want {
			if strings.Contains(r.Stderr, w) {
				return nil
			}
		}
		return fmt.Errorf("the error output has none of %q", want)
	}
}

func outMatches(re string) okFunc {
	rx := regexp.MustCompile(re)
	return func(_ *play, r Result) error {
		if !rx.MatchString(r.Stdout) {
			return fmt.Errorf("the output does not match %s", re)
		}
		return nil
	}
}

// answeredBy: an HTTP answer naming one of the nodes.
func answeredBy(nodes ...string) okFunc {
	return func(_ *play, r Result) error {
		if got := strings.TrimSpace(r.Stdout); !slices.Contains(nodes, got) {
			return fmt.Errorf("answered by %q, want one of %v", got, nodes)
		}
		return nil
	}
}

// notAnsweredByVar: answered by a node of the web Service other than the
// one in a shell variable.
func notAnsweredByVar(name string) okFunc {
	return func(p *play, r Result) error {
		node := p.value(name)
		got := strings.TrimSpace(r.Stdout)
		if got == node || !strings.HasPrefix(got, "aks-pool1-") {
			return fmt.Errorf("answered by %q, want a node of pool1 other than $%s=%s", got, name, node)
		}
		return nil
	}
}

var ipv4 = regexp.MustCompile(`^127\.64\.\d+\.\d+$`)

func varIsIP(name string) okFunc {
	return func(p *play, _ Result) error {
		if v := p.value(name); !ipv4.MatchString(v) {
			return fmt.Errorf("$%s is %q, want an address of 127.64.0.0/16", name, v)
		}
		return nil
	}
}

// varMatches: the shell variable's value matches re.
func varMatches(name, re string) okFunc {
	return func(p *play, _ Result) error {
		if v := p.value(name); !regexp.MustCompile(re).MatchString(v) {
			return fmt.Errorf("$%s is %q, want it to match %s", name, v, re)
		}
		return nil
	}
}

// servicesWithIPs: kubectl get svc lists the Services with an external IP
// from the emulated Azure's range.
func servicesWithIPs(names ...string) okFunc {
	return func(_ *play, r Result) error {
		ips := externalIPs(r.Stdout)
		for _, n := range names {
			if !ipv4.MatchString(ips[n]) {
				return fmt.Errorf("service %s has EXTERNAL-IP %q, want one of 127.64.0.0/16", n, ips[n])
			}
		}
		return nil
	}
}

// externalIPs reads the EXTERNAL-IP column of kubectl get svc.
func externalIPs(out string) map[string]string {
	ips := map[string]string{}
	lines := strings.Split(out, "\n")
	if len(lines) == 0 {
		return ips
	}
	col := slices.Index(strings.Fields(lines[0]), "EXTERNAL-IP")
	for _, l := range lines[1:] {
		if f := strings.Fields(l); col >= 0 && len(f) > col {
			ips[f[0]] = f[col]
		}
	}
	return ips
}

// recordServiceIPs keeps the Services' IPs before the migration.
func recordServiceIPs(p *play, r Result) error {
	ips := externalIPs(r.Stdout)
	if len(ips) == 0 {
		return errors.New("no Service listed")
	}
	for n, ip := range ips {
		if ip == "" || ip == "<pending>" || ip == "<none>" {
			return fmt.Errorf("service %s has no external IP (%q)", n, ip)
		}
	}
	p.saved = ips
	return nil
}

// sameServiceIPs: the Services kept the IPs recordServiceIPs saw.
func sameServiceIPs(p *play, r Result) error {
	now := externalIPs(r.Stdout)
	for n, ip := range p.saved {
		if now[n] != ip {
			return fmt.Errorf("service %s has %q, had %q before the migration", n, now[n], ip)
		}
	}
	return nil
}

// adminStates: azlb status shows each node's pool entry with this state
// (the node's line: NAME ... STATE).
func adminStates(want map[string]string) okFunc {
	return func(_ *play, r Result) error {
		for node, state := range want {
			found := false
			for _, line := range strings.Split(r.Stdout, "\n") {
				f := strings.Fields(line)
				if len(f) >= 3 && f[0] == node {
					found = true
					if f[2] != state {
						return fmt.Errorf("%s is %s in azlb status, want %s", node, f[2], state)
					}
				}
			}
			if !found {
				return fmt.Errorf("azlb status shows no pool entry of %s", node)
			}
		}
		return nil
	}
}

func fileHas(path, want string) okFunc {
	return func(p *play, _ Result) error {
		b, err := readRepoFile(p, path)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), want) {
			return fmt.Errorf("%s lacks %q", path, want)
		}
		return nil
	}
}

// earlierErrHas: the error output of an earlier step (a background job
// writes there) has want by now.
func earlierErrHas(key, want string) okFunc {
	return func(p *play, _ Result) error {
		b, err := p.outputOf(key, ".err")
		if err != nil {
			return err
		}
		if !strings.Contains(b, want) {
			return fmt.Errorf("the output of %q lacks %q:\n%s", key, want, b)
		}
		return nil
	}
}

// listening: something accepts connections on addr in the namespace.
func listening(addr string) okFunc {
	return func(p *play, _ Result) error {
		return p.eventually(10*time.Second, "bash -c 'exec 3<>/dev/tcp/"+strings.Replace(addr, ":", "/", 1)+"'")
	}
}

// eventuallyStatusHas: azlb status shows want within d.
func eventuallyStatusHas(d time.Duration, want string) okFunc {
	return func(p *play, _ Result) error {
		return p.eventually(d, "bin/azlb status | grep -q -- "+strconv.Quote(want))
	}
}

func tookAtLeast(d time.Duration) okFunc {
	return func(_ *play, r Result) error {
		if r.Took < d {
			return fmt.Errorf("returned after %v, want at least %v", r.Took, d)
		}
		return nil
	}
}

// markTime notes when a step ended.
func markTime(name string) okFunc {
	return func(p *play, _ Result) error {
		p.marks[name] = time.Now()
		return nil
	}
}

// heldThenReconnected reads `uniq -c held.txt`: the held connection's node
// answered from the start until the drain period after its deletion had
// passed (at 2 requests a second), then curl reconnected to another node.
func heldThenReconnected(p *play, r Result) error {
	type run struct {
		n    int
		node string
	}
	var runs []run
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			return fmt.Errorf("unexpected line %q", l)
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			return err
		}
		runs = append(runs, run{n, f[1]})
	}
	node := p.value("NODE")
	if len(runs) < 2 || runs[0].node != node || runs[1].node == node {
		return fmt.Errorf("want %s first, then another node", node)
	}
	// From the curl's start to the deletion, plus most of the 20 s drain
	// period, at 2 requests a second.
	held := p.marks["deleted"].Sub(p.marks["held"]) + 15*time.Second
	if least := int(held.Seconds() * 2 * 0.8); runs[0].n < least {
		return fmt.Errorf("%s answered %d requests, want at least %d (%v of 2 a second, less a fifth)", node, runs[0].n, least, held)
	}
	return nil
}

// noNamespaceLeft: the black-box suite deleted its namespace.
func noNamespaceLeft(p *play, _ Result) error {
	return p.eventually(time.Minute, "! bin/kubectl --kubeconfig .sandbox/kubeconfig get ns -o name | grep -q azlb-e2e-")
}

// nothingLeft: make sandbox-down left no process in the namespace but the
// walkthrough's shell.
func nothingLeft(p *play, _ Result) error {
	return p.onlyShellLeft()
}
