package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// pki is a throwaway CA with a server and a client certificate.
type pki struct {
	caPEM                   []byte
	pool                    *x509.CertPool
	server, client          tls.Certificate
	serverPEM, keyPEM       []byte
	clientPEM, clientKeyPEM []byte
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := key()
	caTpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTpl, caTpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(n int64, usage x509.ExtKeyUsage) (tls.Certificate, []byte, []byte) {
		k := key()
		tpl := &x509.Certificate{SerialNumber: big.NewInt(n), Subject: pkix.Name{CommonName: "localhost"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(k)
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c, certPEM, keyPEM
	}
	p := &pki{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.server, p.serverPEM, p.keyPEM = issue(2, x509.ExtKeyUsageServerAuth)
	p.client, p.clientPEM, p.clientKeyPEM = issue(3, x509.ExtKeyUsageClientAuth)
	return p
}

// Clients connect with TLS and a certificate the configured CA signed;
// without one, or in plain text, they get nowhere.
func TestClientTLS(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	for name, b := range map[string][]byte{"server.pem": p.serverPEM, "server.key": p.keyPEM, "ca.pem": p.caPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	masters := redistest.StartN(t, 3)
	port := redistest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cfg := filepath.Join(dir, "config.toml")
	body := fmt.Sprintf("[proxy]\nlisten = %q\ntls_cert = \"server.pem\"\ntls_key = \"server.key\"\ntls_client_ca = \"ca.pem\"\n[redlock]\nmasters = [\"%s\"]\nrestart_guard = false\n",
		addr, strings.Join(redistest.Addrs(masters), `", "`))
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "-config", cfg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ctx := context.Background()
	good := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1,
		TLSConfig: &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{p.client}, ServerName: "localhost"}})
	defer good.Close()
	for deadline := time.Now().Add(5 * time.Second); good.Ping(ctx).Err() != nil; {
		if time.Now().After(deadline) {
			t.Fatalf("TLS client with a certificate: %v", good.Ping(ctx).Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ok, err := good.SetNX(ctx, "tls:lock", "t", 5*time.Second).Result(); err != nil || !ok {
		t.Fatalf("SetNX over TLS: %v %v", ok, err)
	}
	noCert := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, TLSConfig: &tls.Config{RootCAs: p.pool, ServerName: "localhost"}})
	defer noCert.Close()
	if err := noCert.Ping(ctx).Err(); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	plain := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: time.Second})
	defer plain.Close()
	if err := plain.Ping(ctx).Err(); err == nil {
		t.Fatal("a plain-text client was served")
	}
	out, err := exec.Command(binary, "-check-config", "-config", cfg, "-listen", "127.0.0.1:1").CombinedOutput()
	if err != nil {
		t.Fatalf("-check-config with TLS: %v %s", err, out)
	}
}

// The proxy reaches masters that accept TLS only and ask for a client
// certificate, for lock commands and passthrough alike.
func TestMasterTLS(t *testing.T) {
	redistest.Require(t)
	p := newPKI(t)
	dir := t.TempDir()
	files := map[string][]byte{"server.pem": p.serverPEM, "server.key": p.keyPEM, "ca.pem": p.caPEM,
		"client.pem": p.clientPEM, "client.key": p.clientKeyPEM}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	clientTLS := &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{p.client}, ServerName: "localhost"}
	var addrs []string
	var direct []*redis.Client
	for i := 0; i < 3; i++ {
		port := redistest.FreePort(t)
		srv := exec.Command("redis-server", "--port", "0", "--tls-port", fmt.Sprint(port), "--bind", "127.0.0.1",
			"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
			"--tls-ca-cert-file", filepath.Join(dir, "ca.pem"), "--tls-auth-clients", "yes",
			"--save", "", "--appendonly", "no", "--dir", t.TempDir())
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: clientTLS, MaxRetries: -1, Protocol: 2})
		defer c.Close()
		for deadline := time.Now().Add(10 * time.Second); c.Ping(ctx).Err() != nil; {
			if time.Now().After(deadline) {
				t.Fatalf("TLS master on %s: %v", addr, c.Ping(ctx).Err())
			}
			time.Sleep(20 * time.Millisecond)
		}
		addrs, direct = append(addrs, addr), append(direct, c)
	}
	port := redistest.FreePort(t)
	cfg := filepath.Join(dir, "config.toml")
	body := fmt.Sprintf("[proxy]\nlisten = \"127.0.0.1:%d\"\nlock_keys = [\"lock:*\"]\n[redlock]\nmasters = [\"%s\"]\nrestart_guard = false\ntls_ca = \"ca.pem\"\ntls_cert = \"client.pem\"\ntls_key = \"client.key\"\ntls_server_name = \"localhost\"\n",
		port, strings.Join(addrs, `", "`))
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "-config", cfg)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); c.Ping(ctx).Err() != nil; {
		if time.Now().After(deadline) {
			t.Fatal("proxy did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ok, err := c.SetNX(ctx, "lock:tls", "t", 10*time.Second).Result(); err != nil || !ok {
		t.Fatalf("acquire through TLS masters: %v %v", ok, err)
	}
	held := 0
	for _, d := range direct {
		if v, _ := d.Get(ctx, "lock:tls").Result(); v == "t" {
			held++
		}
	}
	if held < 2 {
		t.Fatalf("lock on %d TLS masters, want a quorum", held)
	}
	if n, err := c.Incr(ctx, "plain").Result(); err != nil || n != 1 {
		t.Fatalf("passthrough to a TLS backend: %v %v", n, err)
	}
}
