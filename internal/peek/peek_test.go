package peek

import (
	"net"
	"runtime"
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("peek needs a unix socket API")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	wait := func(want State) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for got := Of(c); got != want; got = Of(c) {
			if time.Now().After(deadline) {
				t.Fatalf("Of = %v, want %v", got, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	wait(Nothing)
	if _, err := s.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	wait(Data)
	b := make([]byte, 1)
	if _, err := c.Read(b); err != nil || b[0] != 'x' { // Of took nothing
		t.Fatalf("read after peeking: %q %v", b, err)
	}
	wait(Nothing)
	s.Close()
	wait(EOF)
	if !EOF.Broken() || !Data.Broken() || !Failed.Broken() || Nothing.Broken() || Unknown.Broken() {
		t.Fatal("Broken")
	}
}
