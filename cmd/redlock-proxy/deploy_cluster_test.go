package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v2"

	"github.com/redlock-proxy/redlock-proxy/redlock/engine"
)

// The files that deploy voters as Redis Clusters (docker-compose-cluster.yml
// with compose-cluster-config.toml) agree with the product: the
// configuration loads through the real loader; every voter is a cluster://
// entry whose seeds are services of the file, on the port they listen on,
// cluster-enabled, persisting every write and evicting nothing, announcing
// their service names; no node is in two voters; a one-shot service makes
// each voter's cluster of exactly its seeds before the proxy starts; the
// proxy has a backend of its own.

func TestDeployComposeClusterAgreesWithTheProduct(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "docker-compose-cluster.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// What docker-compose does to the file's values: $$ is a $.
	raw = []byte(strings.ReplaceAll(string(raw), "$$", "$"))
	var f composeFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("docker-compose-cluster.yml: %v", err)
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

	// The one-shot service that makes the clusters: each line
	// "make_cluster NODE…" makes one cluster of those nodes.
	const creator = "cluster-create"
	cs, ok := f.Services[creator]
	if !ok {
		t.Fatalf("no %s service", creator)
	}
	cscript, _ := script(creator)
	made := map[string][]string{} // by first node
	for _, l := range strings.Split(cscript, "\n") {
		if fl := strings.Fields(l); len(fl) > 1 && fl[0] == "make_cluster" {
			made[fl[1]] = fl[1:]
		}
	}
	if !strings.Contains(cscript, "redis-cli --cluster create") || !strings.Contains(cscript, "--cluster-yes") ||
		!strings.Contains(cscript, "--cluster-replicas 0") || !strings.Contains(cscript, "set -e") {
		t.Errorf("%s does not run redis-cli --cluster create … --cluster-replicas 0 --cluster-yes under set -e:\n%s", creator, cscript)
	}
	if out, err := exec.Command("sh", "-n", "-c", cscript).CombinedOutput(); err != nil {
		t.Errorf("%s's script is not valid sh: %v\n%s", creator, err, out)
	}
	if cs.Restart != "no" {
		t.Errorf("%s: restart %q, want \"no\" (it runs once)", creator, cs.Restart)
	}
	if p.DependsOn[creator].Condition != "service_completed_successfully" {
		t.Errorf("the proxy does not wait for %s to complete: %q", creator, p.DependsOn[creator].Condition)
	}

	if len(cfg.Redlock.Masters) != 3 {
		t.Errorf("%d voters, want 3", len(cfg.Redlock.Masters))
	}
	nodes := map[string]string{} // node → the voter it is in
	for _, m := range cfg.Redlock.Masters {
		a, err := engine.ParseClusterAddr(m)
		if err != nil {
			t.Errorf("voter %s is not a Redis Cluster: %v", m, err)
			continue
		}
		if len(a.Seeds) < 3 {
			t.Errorf("voter %s: %d seeds, want its 3 primaries", m, len(a.Seeds))
		}
		var hosts []string
		for _, s := range a.Seeds {
			host, _, _ := net.SplitHostPort(s)
			hosts = append(hosts, host)
			if other, ok := nodes[host]; ok {
				t.Errorf("node %s is in two voters, %s and %s", host, other, m)
			}
			nodes[host] = m
			svc, ok := f.Services[host]
			if !ok {
				t.Errorf("seed %s of %s is not a service of docker-compose-cluster.yml", s, m)
				continue
			}
			sc, args := script(host)
			if flagValue(args, "--port") != strconv.Itoa(port(t, s)) {
				t.Errorf("seed %s listens on port %q", s, flagValue(args, "--port"))
			}
			if !strings.Contains(cscript, ":"+strconv.Itoa(port(t, s))) {
				t.Errorf("%s does not join %s on its port", creator, s)
			}
			if flagValue(args, "--cluster-enabled") != "yes" || flagValue(args, "--cluster-config-file") == "" {
				t.Errorf("seed %s: want --cluster-enabled yes and a --cluster-config-file: %q", s, args)
			}
			if !durableArgs(args) || flagValue(args, "--maxmemory-policy") != "noeviction" {
				t.Errorf("seed %s: want --appendonly yes --appendfsync always --maxmemory-policy noeviction: %q", s, args)
			}
			if !strings.Contains(sc, `--cluster-announce-hostname "$ANNOUNCE"`) || !strings.Contains(sc, `"$@"`) ||
				svc.Environment["ANNOUNCE"] != host || flagValue(args, "--cluster-preferred-endpoint-type") != "hostname" {
				t.Errorf("seed %s does not announce its service name as its endpoint (ANNOUNCE=%q):\n%s %q", s, svc.Environment["ANNOUNCE"], sc, args)
			}
			if !slices.ContainsFunc(svc.Volumes, func(v string) bool { return strings.HasSuffix(v, ":/data") }) {
				t.Errorf("seed %s keeps its data and nodes.conf on no volume", s)
			}
			if cs.DependsOn[host].Condition != "service_healthy" {
				t.Errorf("%s does not wait for %s to be healthy", creator, host)
			}
		}
		// The cluster made is of exactly the voter's seeds: a node left
		// out would serve slots the proxy finds through the others, but
		// a seed in no cluster would have none.
		if len(hosts) > 0 && !slices.Equal(made[hosts[0]], hosts) {
			t.Errorf("voter %s: %s makes a cluster of %v, want %v", m, creator, made[hosts[0]], hosts)
		}
	}
	if len(made) != len(cfg.Redlock.Masters) {
		t.Errorf("%s makes %d clusters for %d voters", creator, len(made), len(cfg.Redlock.Masters))
	}

	// The backend is the application's own Redis: a service that is not a
	// voter's node, on the port it listens on.
	bhost, _, _ := net.SplitHostPort(cfg.Proxy.Backend)
	if b, ok := f.Services[bhost]; !ok || nodes[bhost] != "" || cfg.Proxy.Backend == "" {
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
