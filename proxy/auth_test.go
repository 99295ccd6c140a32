package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-proxy/redlock-proxy/proxy"
)

func TestClientAuth(t *testing.T) {
	e := newEnv(t, 3, func(c *proxy.Config) {
		c.Proxy.Password = "s3cret"
		c.Proxy.Users = []proxy.UserConfig{{Name: "app", Password: "apppw"}}
	})
	ctx := context.Background()
	// Before AUTH every command is refused, lock commands first of all.
	for _, args := range [][]any{{"PING"}, {"SET", e.key("k"), "t", "NX", "PX", 1000}, {"HELLO", 2}} {
		_, err := e.do(args...)
		if err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
			t.Fatalf("%v before AUTH: %v, want NOAUTH", args, err)
		}
	}
	mustEqual(t, "nothing locked", count(e.onMasters(e.key("k")), ""), 3)
	_, err := e.do("AUTH", "wrong")
	if err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Fatalf("bad password: %v", err)
	}
	_, err = e.do("AUTH", "app", "s3cret")
	if err == nil || !strings.HasPrefix(err.Error(), "WRONGPASS") {
		t.Fatalf("another user's password: %v", err)
	}
	// go-redis clients authenticate as applications do: the default user's
	// password, a user and password, and HELLO … AUTH.
	for _, o := range []*redis.Options{
		{Addr: e.addr, Password: "s3cret", Protocol: 2},
		{Addr: e.addr, Username: "app", Password: "apppw", Protocol: 2},
		{Addr: e.addr, Username: "app", Password: "apppw"}, // HELLO 3 AUTH → NOPROTO → fallback
	} {
		c := redis.NewClient(o)
		ok, err := c.SetNX(ctx, e.key("k"+o.Username+o.Password+string(rune('0'+o.Protocol))), "t", 0).Result()
		c.Close()
		if err != nil || !ok {
			t.Fatalf("client %+v: %v %v", o, ok, err)
		}
	}
	v, err := e.do("HELLO", 2, "AUTH", "default", "s3cret")
	if err != nil || len(v.([]any)) != 14 {
		t.Fatalf("HELLO 2 AUTH: %v %v", v, err)
	}
}
