package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.yaml.in/yaml/v2"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
	"github.com/redlock-proxy/redlock-proxy/proxy"
)

// The files under deploy/ agree with the product: their configurations load
// through the real config loader, their ports are the ones configured, their
// probe paths are served, their masters persist every write, and they give
// the process longer to stop than it takes.

const deployDir = "../../deploy"

// dockerConfigPath is where the image's ENTRYPOINT reads its configuration.
func dockerConfigPath(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ENTRYPOINT (\[.*\])$`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("Dockerfile has no ENTRYPOINT in exec form")
	}
	var argv []string
	if err := json.Unmarshal(m[1], &argv); err != nil {
		t.Fatalf("Dockerfile ENTRYPOINT: %v", err)
	}
	i := slices.Index(argv, "-config")
	if i < 0 || i+1 >= len(argv) {
		t.Fatalf("Dockerfile ENTRYPOINT names no -config: %v", argv)
	}
	return argv[i+1]
}

// loadDeployConfig loads a configuration from the deploy files through the
// real loader, as the binary would.
func loadDeployConfig(t *testing.T, what, body string) proxy.Config {
	t.Helper()
	cfg, err := loadConfig(writeConfig(t, body), overrides{})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return cfg
}

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// flagValue returns the argument after name in argv, or "".
func flagValue(argv []string, name string) string {
	if i := slices.Index(argv, name); i >= 0 && i+1 < len(argv) {
		return argv[i+1]
	}
	return ""
}

// durableArgs reports whether redis-server arguments persist every write.
func durableArgs(argv []string) bool {
	return flagValue(argv, "--appendonly") == "yes" && flagValue(argv, "--appendfsync") == "always"
}

// serveProbes runs the proxy in-process with cfg's metrics settings in front
// of real masters, and returns the base URL of its metrics listener.
func serveProbes(t *testing.T, cfg proxy.Config) string {
	t.Helper()
	masters := redistest.StartN(t, len(cfg.Redlock.Masters))
	cfg.Redlock.Masters = redistest.Addrs(masters)
	cfg.Redlock.Password, cfg.Redlock.MasterAuth, cfg.Proxy.Backend = "", nil, ""
	cfg.Redlock.RestartGuard, cfg.Redlock.WaitReplicas = false, 0
	cfg.Proxy.Listen = "127.0.0.1:0"
	cfg.Metrics.Listen = fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t))
	srv, err := proxy.New(cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = srv.Serve(); close(done) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return "http://" + srv.MetricsAddr().String()
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 || time.Now().After(deadline) {
				return resp.StatusCode
			}
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type composeFile struct {
	Services map[string]struct {
		Image       string
		Command     []string
		Environment map[string]string
		Build       struct{ Context, Dockerfile string }
		Volumes     []string
		Ports       []string
		Restart     string
		// StopGrace is a Go duration string such as "15s".
		StopGrace string                                `yaml:"stop_grace_period"`
		DependsOn map[string]struct{ Condition string } `yaml:"depends_on"`
	}
}

func TestDeployComposeAgreesWithTheProduct(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
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

	// Every master is a redis service of the file, on the port it listens
	// on, persisting every write, and the proxy waits for it.
	for _, m := range cfg.Redlock.Masters {
		host, _, _ := net.SplitHostPort(m)
		s, ok := f.Services[host]
		switch {
		case !ok:
			t.Errorf("master %s is not a service of docker-compose.yml", m)
		case flagValue(s.Command, "--port") != strconv.Itoa(port(t, m)):
			t.Errorf("master %s: the service listens on %q", m, flagValue(s.Command, "--port"))
		case !durableArgs(s.Command):
			t.Errorf("master %s does not run with appendonly yes and appendfsync always: %v", m, s.Command)
		case p.DependsOn[host].Condition != "service_healthy":
			t.Errorf("the proxy does not wait for master %s to be healthy", m)
		}
	}
	if len(cfg.Redlock.Masters) != 3 {
		t.Errorf("%d masters, want 3", len(cfg.Redlock.Masters))
	}
	// The client and metrics ports are published; the proxy listens on
	// every interface of its container.
	for _, addr := range []string{cfg.Proxy.Listen, cfg.Metrics.Listen} {
		if !strings.HasPrefix(addr, "0.0.0.0:") {
			t.Errorf("%s is not reachable from outside the container", addr)
		}
		published := false
		for _, pm := range p.Ports {
			published = published || strings.HasSuffix(pm, fmt.Sprintf(":%d", port(t, addr)))
		}
		if !published {
			t.Errorf("port of %s is not published: %v", addr, p.Ports)
		}
	}
	if d, err := time.ParseDuration(p.StopGrace); err != nil || d <= shutdownWait {
		t.Errorf("stop_grace_period %q: want longer than the %s the proxy may take to stop", p.StopGrace, shutdownWait)
	}
}

// k8sObject is the part of a Kubernetes object these checks read.
type k8sObject struct {
	Kind     string
	Metadata struct {
		Name   string
		Labels map[string]string
	}
	Data       map[string]string
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Selector    yaml.MapSlice // a Service's labels, or a workload's matchLabels
		ServiceName string        `yaml:"serviceName"`
		Replicas    int
		ClusterIP   string `yaml:"clusterIP"`
		NotReady    bool   `yaml:"publishNotReadyAddresses"`
		Ports       []struct {
			Name       string
			Port       int
			TargetPort string `yaml:"targetPort"`
		}
		Template struct {
			Metadata struct{ Labels map[string]string }
			Spec     k8sPodSpec
		}
	}
}

type k8sPodSpec struct {
	TerminationGrace int `yaml:"terminationGracePeriodSeconds"`
	Containers       []struct {
		Image   string
		Command []string
		Args    []string
		Env     []struct {
			Name      string
			Value     string
			ValueFrom struct {
				SecretKeyRef struct{ Name, Key string } `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		}
		Ports []struct {
			Name          string
			ContainerPort int `yaml:"containerPort"`
		}
		ReadinessProbe k8sProbe `yaml:"readinessProbe"`
		LivenessProbe  k8sProbe `yaml:"livenessProbe"`
		VolumeMounts   []struct {
			Name      string
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	Volumes []struct {
		Name      string
		ConfigMap struct{ Name string } `yaml:"configMap"`
	}
}

type k8sProbe struct {
	HTTPGet struct {
		Path string
		Port string
	} `yaml:"httpGet"`
}

// labels reads a selector: a Service's map, or a workload's matchLabels.
func (o *k8sObject) labels() map[string]string {
	out := map[string]string{}
	for _, it := range o.Spec.Selector {
		if it.Key == "matchLabels" {
			for _, l := range it.Value.(yaml.MapSlice) {
				out[l.Key.(string)] = fmt.Sprint(l.Value)
			}
			return out
		}
		out[it.Key.(string)] = fmt.Sprint(it.Value)
	}
	return out
}

func selects(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

func readK8s(t *testing.T, files ...string) []*k8sObject {
	t.Helper()
	return readK8sIn(t, "kubernetes", files...)
}

// readK8sIn reads manifests of the directory dir of deploy/.
func readK8sIn(t *testing.T, dir string, files ...string) []*k8sObject {
	t.Helper()
	var out []*k8sObject
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(deployDir, dir, f))
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var o k8sObject
			if err := dec.Decode(&o); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, &o)
		}
	}
	return out
}

func find(objs []*k8sObject, kind, name string) *k8sObject {
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o
		}
	}
	return nil
}

// containerPort resolves a Service's target port (a name or a number) in
// the pods of the workload it selects.
func containerPort(t *testing.T, objs []*k8sObject, svc *k8sObject, target string) (*k8sObject, int) {
	t.Helper()
	for _, o := range objs {
		if (o.Kind != "StatefulSet" && o.Kind != "Deployment") || !selects(svc.labels(), o.Spec.Template.Metadata.Labels) {
			continue
		}
		for _, c := range o.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == target || strconv.Itoa(p.ContainerPort) == target {
					return o, p.ContainerPort
				}
			}
		}
	}
	t.Fatalf("service %s: no pod it selects has port %q", svc.Metadata.Name, target)
	return nil, 0
}

func TestDeployKubernetesAgreesWithTheProduct(t *testing.T) {
	objs := readK8s(t, "masters.yaml", "proxy.yaml")
	cfg := checkK8sProxy(t, objs)

	// Every master is a Service in front of its own StatefulSet, on the
	// port redis listens on, persisting every write.
	sets := map[*k8sObject]bool{}
	for _, m := range cfg.Redlock.Masters {
		host, _, _ := net.SplitHostPort(m)
		s := find(objs, "Service", host)
		if s == nil {
			t.Errorf("master %s: no Service %s", m, host)
			continue
		}
		for _, p := range s.Spec.Ports {
			if p.Port != port(t, m) {
				continue
			}
			ss, n := containerPort(t, objs, s, p.TargetPort)
			args := ss.Spec.Template.Spec.Containers[0].Args
			if ss.Kind != "StatefulSet" || flagValue(args, "--port") != strconv.Itoa(n) || !durableArgs(args) {
				t.Errorf("master %s: %s %s runs %v", m, ss.Kind, ss.Metadata.Name, args)
			}
			sets[ss] = true
		}
	}
	if len(sets) != 3 || len(cfg.Redlock.Masters) != 3 {
		t.Errorf("%d masters on %d StatefulSets, want 3 on 3", len(cfg.Redlock.Masters), len(sets))
	}
}

// checkK8sProxy checks the Deployment redlock-proxy of objs against the
// product, and returns the configuration its ConfigMap holds.
func checkK8sProxy(t *testing.T, objs []*k8sObject) proxy.Config {
	t.Helper()
	dep := find(objs, "Deployment", "redlock-proxy")
	if dep == nil || len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("no Deployment redlock-proxy with one container")
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]

	// The ConfigMap is mounted where the image reads its configuration,
	// and loads through the real loader.
	want := dockerConfigPath(t)
	var cmName string
	for _, m := range c.VolumeMounts {
		if m.MountPath+"/config.toml" == want {
			for _, v := range pod.Volumes {
				if v.Name == m.Name {
					cmName = v.ConfigMap.Name
				}
			}
		}
	}
	cm := find(objs, "ConfigMap", cmName)
	if cm == nil || cm.Data["config.toml"] == "" {
		t.Fatalf("no ConfigMap with config.toml is mounted at %s (the image's -config)", want)
	}
	cfg := loadDeployConfig(t, "ConfigMap "+cmName, cm.Data["config.toml"])

	// The environment the pod sets is read by the binary, from Secrets
	// that exist.
	for _, e := range c.Env {
		known := slices.ContainsFunc(overrideTable, func(o struct {
			flag, env, help string
			set             func(c *proxy.Config, v string)
		}) bool {
			return o.env == e.Name
		})
		if !known {
			t.Errorf("env %s is not read by redlock-proxy", e.Name)
		}
		ref := e.ValueFrom.SecretKeyRef
		if s := find(objs, "Secret", ref.Name); s == nil || s.StringData[ref.Key] == "" {
			t.Errorf("env %s: no Secret %s with key %s", e.Name, ref.Name, ref.Key)
		}
	}

	// Container ports, probes and the Service match the configuration.
	ports := map[string]int{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["redis"] != port(t, cfg.Proxy.Listen) || ports["metrics"] != port(t, cfg.Metrics.Listen) {
		t.Errorf("container ports %v, configuration listens on %s and %s", ports, cfg.Proxy.Listen, cfg.Metrics.Listen)
	}
	base := serveProbes(t, cfg)
	for _, pr := range []struct {
		what string
		p    k8sProbe
		path string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if pr.p.HTTPGet.Path != pr.path || ports[pr.p.HTTPGet.Port] != port(t, cfg.Metrics.Listen) {
			t.Errorf("%s probe: %+v, want %s on the metrics port", pr.what, pr.p.HTTPGet, pr.path)
		}
		if code := getStatus(t, base+pr.p.HTTPGet.Path); code != 200 {
			t.Errorf("%s probe path %s answers %d with every master up", pr.what, pr.p.HTTPGet.Path, code)
		}
	}
	svc := find(objs, "Service", "redlock-proxy")
	if svc == nil {
		t.Fatal("no Service redlock-proxy")
	}
	for _, p := range svc.Spec.Ports {
		if w, n := containerPort(t, objs, svc, p.TargetPort); w != dep || n != ports[p.Name] {
			t.Errorf("Service redlock-proxy port %s does not reach the proxy's port", p.Name)
		}
	}
	if pod.TerminationGrace <= int(shutdownWait/time.Second) {
		t.Errorf("terminationGracePeriodSeconds %d: want more than the %s the proxy may take to stop", pod.TerminationGrace, shutdownWait)
	}
	return cfg
}

// unit reads a systemd unit's [Service] settings; repeated keys accumulate.
func unit(t *testing.T, path string) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	section := ""
	for _, l := range strings.Split(string(raw), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || l[0] == '#' || l[0] == ';':
		case l[0] == '[':
			section = l
		case section == "[Service]":
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				t.Fatalf("%s: %q is not key=value", path, l)
			}
			out[k] = append(out[k], v)
		}
	}
	return out
}

func TestDeploySystemdUnitAgreesWithTheProduct(t *testing.T) {
	u := unit(t, filepath.Join(deployDir, "systemd", "redlock-proxy.service"))
	one := func(k string) string {
		if len(u[k]) != 1 {
			t.Fatalf("%s set %d times", k, len(u[k]))
		}
		return u[k][0]
	}
	// ExecStartPre and ExecStart run with flags the binary accepts: with
	// the configuration path replaced by a valid file, they check it.
	cfg := writeConfig(t, "[redlock]\nmasters = [\"127.0.0.1:1\"]\n")
	for _, k := range []string{"ExecStartPre", "ExecStart"} {
		argv := strings.Fields(one(k))
		if argv[0] != "/usr/local/bin/redlock-proxy" || flagValue(argv, "-config") == "" {
			t.Fatalf("%s=%s", k, one(k))
		}
		argv[slices.Index(argv, "-config")+1] = cfg
		args := argv[1:]
		if !slices.Contains(args, "-check-config") {
			args = append(args, "-check-config")
		}
		if out, err := exec.Command(binary, args...).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", k, err, out)
		}
	}
	if r := one("ExecReload"); !strings.Contains(r, "kill -HUP $MAINPID") {
		t.Errorf("ExecReload=%s does not send SIGHUP", r)
	}
	if d, err := time.ParseDuration(one("TimeoutStopSec")); err != nil || d <= shutdownWait {
		t.Errorf("TimeoutStopSec=%s: want longer than the %s the proxy may take to stop", one("TimeoutStopSec"), shutdownWait)
	}
	if n, _ := strconv.Atoi(one("LimitNOFILE")); n <= proxy.DefaultConfig().Proxy.MaxClients {
		t.Errorf("LimitNOFILE=%s: want more than proxy.max_clients (%d)", one("LimitNOFILE"), proxy.DefaultConfig().Proxy.MaxClients)
	}
	if one("User") == "" || one("User") == "root" {
		t.Error("runs as root")
	}
	for k, v := range map[string]string{"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
		"PrivateTmp": "yes", "CapabilityBoundingSet": "", "RestrictSUIDSGID": "yes"} {
		if one(k) != v {
			t.Errorf("%s=%s, want %q", k, one(k), v)
		}
	}
}
