package redistest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// RequireChromium returns the path of a headless-capable Chromium. It fails
// the test when none is installed and CI=true, and skips it otherwise.
func RequireChromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed; CI must install it (apt-get install chromium)")
	}
	t.Skip("chromium not installed")
	return ""
}

// Chromium runs headless Chromium with a fresh profile on url, with extra
// arguments such as "--dump-dom" or "--screenshot=file", and returns what
// it printed on stdout.
func Chromium(t testing.TB, url string, extra ...string) string {
	t.Helper()
	bin := RequireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir=" + t.TempDir()}, extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", extra, err, stderr.String())
	}
	return string(out)
}
