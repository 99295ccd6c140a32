package compat

import "testing"

// TestPHPLaravelLock runs Laravel's Redis cache lock (Debian's
// php-illuminate-cache and php-illuminate-redis over the phpredis extension)
// through the proxy.
func TestPHPLaravelLock(t *testing.T) {
	need(t, "/usr/bin/php")
	need(t, "/usr/share/php/Illuminate/Cache/autoload.php")
	need(t, "/usr/share/php/Illuminate/Redis/autoload.php")
	s := startStack(t)
	run(t, s, "php", "/usr/bin/php", "laravel_lock_test.php")
}
