package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// The files that deploy voters as Sentinel groups (docker-compose-sentinel.yml
// with compose-sentinel-config.toml, and kubernetes-sentinel/) agree with
// the product: the configuration loads through the real loader; every voter
// is a sentinel:// entry whose sentinels exist, on the port they listen on,
// and monitor the entry's group name with service names; the group's
// primary and replica persist every write, evict nothing and refuse writes
// without a replica; the proxy has a backend of its own.

// sentinelConf is what a sentinel's start script writes as its
// configuration.
type sentinelConf struct {
	port     int
	resolve  bool // sentinel resolve-hostnames yes, before any monitor
	announce bool // sentinel announce-hostnames yes
	// announceIP is the argument of sentinel announce-ip, as written.
	announceIP string
	monitors   map[string]sentinelMonitor // by group name
	writes     bool                       // the script writes the file it starts from
}

type sentinelMonitor struct {
	host         string
	port, quorum int
}

var (
	monitorLine  = regexp.MustCompile(`^sentinel monitor (\S+) (\S+) (\d+) (\d+)$`)
	execSentinel = regexp.MustCompile(`(?m)^exec .*redis-server (\S+) --sentinel$`)
)

// parseSentinelScript reads the configuration a sentinel's sh -c script
// writes (a here-document) and starts from.
func parseSentinelScript(t *testing.T, what, script string) sentinelConf {
	t.Helper()
	c := sentinelConf{monitors: map[string]sentinelMonitor{}}
	m := execSentinel.FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("%s: the script does not exec redis-server <file> --sentinel:\n%s", what, script)
	}
	c.writes = strings.Contains(script, "> "+m[1]+" <<")
	for _, l := range strings.Split(script, "\n") {
		l = strings.TrimSpace(l)
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "port":
			c.port, _ = strconv.Atoi(f[1])
		case l == "sentinel resolve-hostnames yes" && len(c.monitors) == 0:
			c.resolve = true
		case l == "sentinel announce-hostnames yes":
			c.announce = true
		case len(f) == 3 && f[0] == "sentinel" && f[1] == "announce-ip":
			c.announceIP = f[2]
		case monitorLine.MatchString(l):
			mm := monitorLine.FindStringSubmatch(l)
			p, _ := strconv.Atoi(mm[3])
			q, _ := strconv.Atoi(mm[4])
			c.monitors[mm[1]] = sentinelMonitor{host: mm[2], port: p, quorum: q}
		}
	}
	return c
}

// checkVoterArgs reports what a voter's redis-server arguments lack.
func checkVoterArgs(argv []string, port int) []string {
	var bad []string
	if flagValue(argv, "--port") != strconv.Itoa(port) {
		bad = append(bad, "--port "+strconv.Itoa(port))
	}
	if !durableArgs(argv) {
		bad = append(bad, "--appendonly yes --appendfsync always")
	}
	if flagValue(argv, "--maxmemory-policy") != "noeviction" {
		bad = append(bad, "--maxmemory-policy noeviction")
	}
	if n, _ := strconv.Atoi(flagValue(argv, "--min-replicas-to-write")); n < 1 {
		bad = append(bad, "--min-replicas-to-write 1 or more")
	}
	if n, _ := strconv.Atoi(flagValue(argv, "--min-replicas-max-lag")); n < 1 {
		bad = append(bad, "--min-replicas-max-lag")
	}
	return bad
}

// checkSentinelEntries checks the configuration's voters: three, each a
// Sentinel group whose sentinels conf(host, port) describes (nil: not a
// sentinel of the deployment), and returns the primary each group's
// sentinels monitor at first, by group name.
func checkSentinelEntries(t *testing.T, cfg proxy.Config, conf func(host string, port int) *sentinelConf) map[string]sentinelMonitor {
	t.Helper()
	if len(cfg.Redlock.Masters) != 3 {
		t.Errorf("%d voters, want 3", len(cfg.Redlock.Masters))
	}
	primaries := map[string]sentinelMonitor{}
	for _, m := range cfg.Redlock.Masters {
		a, err := engine.ParseSentinelAddr(m)
		if err != nil {
			t.Errorf("voter %s is not a Sentinel group: %v", m, err)
			continue
		}
		if len(a.Sentinels) < 3 {
			t.Errorf("voter %s: %d sentinels, want 3 or more", m, len(a.Sentinels))
		}
		for _, s := range a.Sentinels {
			host, p, _ := net.SplitHostPort(s)
			pn, _ := strconv.Atoi(p)
			c := conf(host, pn)
			if c == nil {
				continue
			}
			mon, ok := c.monitors[a.Name]
			switch {
			case !c.writes:
				t.Errorf("sentinel %s does not write the configuration file it starts from (sentinels rewrite theirs)", s)
			case c.port != pn:
				t.Errorf("sentinel %s listens on port %d", s, c.port)
			case !c.resolve || !c.announce:
				t.Errorf("sentinel %s: want sentinel resolve-hostnames yes (before its monitors) and announce-hostnames yes", s)
			case !ok:
				t.Errorf("sentinel %s does not monitor %q (voter %s); it monitors %v", s, a.Name, m, c.monitors)
			case mon.quorum <= len(a.Sentinels)/2 || mon.quorum > len(a.Sentinels):
				t.Errorf("sentinel %s: quorum %d for %d sentinels, want a majority of them", s, mon.quorum, len(a.Sentinels))
			case primaries[a.Name] != (sentinelMonitor{}) && primaries[a.Name] != mon:
				t.Errorf("the sentinels of %s disagree on its primary: %v, %v", m, primaries[a.Name], mon)
			}
			if net.ParseIP(mon.host) != nil {
				t.Errorf("sentinel %s monitors %s by address %s: want a name that survives a restart", s, a.Name, mon.host)
			}
			primaries[a.Name] = mon
		}
	}
	if len(primaries) != 3 {
		t.Errorf("%d groups monitored, want 3 different ones: %v", len(primaries), primaries)
	}
	return primaries
}

func TestDeployComposeSentinelAgreesWithTheProduct(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "docker-compose-sentinel.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// What docker-compose does to the file's values: $$ is a $.
	raw = []byte(strings.ReplaceAll(string(raw), "$$", "$"))
	var f composeFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("docker-compose-sentinel.yml: %v", err)
	}
	p, ok := f.Services["proxy"]
	if !ok {
		t.Fatal("no proxy service")
	}
	if _, err := os.Stat(filepath.Join(deployDir, p.Build.Context, p.Build.Dockerfile)); err != nil {
		t.Errorf("proxy build: %v", err)
	}
	want := dockerConfigPath(t)
	var cfgFile string
	for _, v := range p.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == want {
			cfgFile = filepath.Join(deployDir, parts[0])
		}
	}
	if cfgFile == "" {
		t.Fatalf("no volume mounts a configuration at %s (the image's -config): %v", want, p.Volumes)
	}
	body, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadDeployConfig(t, cfgFile, string(body))

	// script is a service's sh -c script, and the arguments after it.
	script := func(name string) (string, []string) {
		c := f.Services[name].Command
		if len(c) < 3 || c[0] != "sh" || c[1] != "-c" {
			t.Fatalf("service %s: command %q is not sh -c <script>", name, c)
		}
		return c[2], c[3:]
	}
	// hasData reports whether the service keeps /data on a volume.
	hasData := func(name string) bool {
		return slices.ContainsFunc(f.Services[name].Volumes, func(v string) bool { return strings.HasSuffix(v, ":/data") })
	}

	voters := map[string]bool{}
	primaries := checkSentinelEntries(t, cfg, func(host string, port int) *sentinelConf {
		if _, ok := f.Services[host]; !ok {
			t.Errorf("sentinel %s is not a service of docker-compose-sentinel.yml", host)
			return nil
		}
		if p.DependsOn[host].Condition != "service_healthy" {
			t.Errorf("the proxy does not wait for sentinel %s to be healthy", host)
		}
		if !hasData(host) {
			t.Errorf("sentinel %s keeps its configuration on no volume", host)
		}
		s, _ := script(host)
		c := parseSentinelScript(t, host, s)
		if c.announceIP != "$ANNOUNCE" || f.Services[host].Environment["ANNOUNCE"] != host {
			t.Errorf("sentinel %s announces %q with ANNOUNCE=%q, want its service name", host, c.announceIP, f.Services[host].Environment["ANNOUNCE"])
		}
		return &c
	})

	// Each group's primary is a service, and so is at least one replica of
	// it; each persists every write, evicts nothing, refuses writes without
	// a replica, and announces its service name.
	for name, mon := range primaries {
		var servers []string
		for s, svc := range f.Services {
			if s == mon.host || svc.Environment["PRIMARY"] == mon.host {
				servers = append(servers, s)
			}
		}
		if len(servers) < 2 || !slices.Contains(servers, mon.host) {
			t.Errorf("group %s: servers %v, want its primary %s and a replica", name, servers, mon.host)
		}
		for _, s := range servers {
			voters[s] = true
			sc, args := script(s)
			if !strings.Contains(sc, "redis-server redis.conf") || !strings.Contains(sc, `"$@"`) ||
				!strings.Contains(sc, `--replica-announce-ip "$ANNOUNCE"`) || !strings.Contains(sc, `replicaof $PRIMARY`) {
				t.Errorf("group %s: %s's script does not start redis-server from its redis.conf with its arguments:\n%s", name, s, sc)
			}
			if bad := checkVoterArgs(args, mon.port); len(bad) > 0 {
				t.Errorf("group %s: %s runs %q, lacking %v", name, s, args, bad)
			}
			if f.Services[s].Environment["ANNOUNCE"] != s || !hasData(s) {
				t.Errorf("group %s: %s announces %q, data on a volume %v", name, s, f.Services[s].Environment["ANNOUNCE"], hasData(s))
			}
		}
	}

	// The backend is the application's own Redis: a service that is not a
	// voter, on the port it listens on.
	bhost, _, _ := net.SplitHostPort(cfg.Proxy.Backend)
	if b, ok := f.Services[bhost]; !ok || voters[bhost] || cfg.Proxy.Backend == "" {
		t.Errorf("proxy.backend %q is not a service of its own", cfg.Proxy.Backend)
	} else if flagValue(b.Command, "--port") != strconv.Itoa(port(t, cfg.Proxy.Backend)) || p.DependsOn[bhost].Condition != "service_healthy" {
		t.Errorf("backend %s: runs %v; the proxy waits for it: %q", cfg.Proxy.Backend, b.Command, p.DependsOn[bhost].Condition)
	}

	for _, addr := range []string{cfg.Proxy.Listen, cfg.Metrics.Listen} {
		if !strings.HasPrefix(addr, "0.0.0.0:") {
			t.Errorf("%s is not reachable from outside the container", addr)
		}
		if !slices.ContainsFunc(p.Ports, func(pm string) bool { return strings.HasSuffix(pm, ":"+strconv.Itoa(port(t, addr))) }) {
			t.Errorf("port of %s is not published: %v", addr, p.Ports)
		}
	}
	if d, err := time.ParseDuration(p.StopGrace); err != nil || d <= shutdownWait {
		t.Errorf("stop_grace_period %q: want longer than the %s the proxy may take to stop", p.StopGrace, shutdownWait)
	}
}

func TestDeployKubernetesSentinelAgreesWithTheProduct(t *testing.T) {
	const dir = "kubernetes-sentinel"
	raw, err := os.ReadFile(filepath.Join(deployDir, dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	objs := readK8sIn(t, dir, k.Resources...)
	cfg := checkK8sProxy(t, objs)

	// podOf finds the StatefulSet whose pod a name <pod>.<service> names,
	// behind a headless Service that publishes it before it is ready.
	podOf := func(what, name string) *k8sObject {
		pod, svc, ok := strings.Cut(name, ".")
		i := strings.LastIndex(pod, "-")
		n, err := strconv.Atoi(pod[i+1:])
		if !ok || i < 0 || err != nil {
			t.Errorf("%s %s is not <pod>.<service>", what, name)
			return nil
		}
		ss := find(objs, "StatefulSet", pod[:i])
		s := find(objs, "Service", svc)
		switch {
		case ss == nil || ss.Spec.ServiceName != svc || n >= ss.Spec.Replicas:
			t.Errorf("%s %s: no pod %s of a StatefulSet of the Service %s", what, name, pod, svc)
			return nil
		case s == nil || s.Spec.ClusterIP != "None" || !s.Spec.NotReady || !selects(s.labels(), ss.Spec.Template.Metadata.Labels):
			t.Errorf("%s %s: want a headless Service %s, publishNotReadyAddresses, selecting %s", what, name, svc, ss.Metadata.Name)
		}
		return ss
	}
	// script is the pod's container's sh -c script, and the arguments
	// after it; env its environment's plain values.
	script := func(ss *k8sObject) (string, []string, map[string]string) {
		c := ss.Spec.Template.Spec.Containers[0]
		if len(c.Command) < 3 || c.Command[0] != "sh" || c.Command[1] != "-c" {
			t.Fatalf("%s: command %q is not sh -c <script>", ss.Metadata.Name, c.Command)
		}
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		return c.Command[2], c.Command[3:], env
	}
	containerPortOf := func(ss *k8sObject, p int) bool {
		return slices.ContainsFunc(ss.Spec.Template.Spec.Containers[0].Ports, func(cp struct {
			Name          string
			ContainerPort int `yaml:"containerPort"`
		}) bool {
			return cp.ContainerPort == p
		})
	}

	primaries := checkSentinelEntries(t, cfg, func(host string, port int) *sentinelConf {
		ss := podOf("sentinel", host)
		if ss == nil {
			return nil
		}
		if !containerPortOf(ss, port) {
			t.Errorf("sentinel %s: its container has no port %d", host, port)
		}
		s, _, _ := script(ss)
		c := parseSentinelScript(t, ss.Metadata.Name, s)
		if svc := strings.SplitN(host, ".", 2)[1]; c.announceIP != "$HOSTNAME."+svc {
			t.Errorf("sentinel %s announces %q, want its name ($HOSTNAME.%s)", host, c.announceIP, svc)
		}
		return &c
	})
	voterSets := map[*k8sObject]bool{}
	for name, mon := range primaries {
		ss := podOf("primary of "+name, mon.host)
		if ss == nil {
			continue
		}
		voterSets[ss] = true
		if ss.Spec.Replicas < 2 {
			t.Errorf("group %s: StatefulSet %s has %d pods, want a primary and a replica", name, ss.Metadata.Name, ss.Spec.Replicas)
		}
		if !containerPortOf(ss, mon.port) {
			t.Errorf("group %s: its container has no port %d", name, mon.port)
		}
		sc, args, env := script(ss)
		svc := strings.SplitN(mon.host, ".", 2)[1]
		if env["SERVICE"] != svc || env["PRIMARY"] != mon.host || !strings.Contains(sc, "replicaof $PRIMARY") ||
			!strings.Contains(sc, `--replica-announce-ip "$HOSTNAME.$SERVICE"`) || !strings.Contains(sc, `"$@"`) {
			t.Errorf("group %s: %s's pods do not start as the primary %s and its replicas, announcing their names (env %v):\n%s", name, ss.Metadata.Name, mon.host, env, sc)
		}
		if bad := checkVoterArgs(args, mon.port); len(bad) > 0 {
			t.Errorf("group %s: %s runs %q, lacking %v", name, ss.Metadata.Name, args, bad)
		}
	}

	// The backend is a Service of its own, not a voter.
	bhost, _, _ := net.SplitHostPort(cfg.Proxy.Backend)
	b := find(objs, "Service", bhost)
	if b == nil || cfg.Proxy.Backend == "" {
		t.Fatalf("proxy.backend %q is not a Service of the manifests", cfg.Proxy.Backend)
	}
	for _, p := range b.Spec.Ports {
		if p.Port == port(t, cfg.Proxy.Backend) {
			w, n := containerPort(t, objs, b, p.TargetPort)
			if voterSets[w] || flagValue(w.Spec.Template.Spec.Containers[0].Args, "--port") != strconv.Itoa(n) {
				t.Errorf("backend %s: %s %s runs %v", cfg.Proxy.Backend, w.Kind, w.Metadata.Name, w.Spec.Template.Spec.Containers[0].Args)
			}
		}
	}
}
