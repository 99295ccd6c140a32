module github.com/redlock-proxy/redlock-proxy/compat/bsmredislock

go 1.26.8

require (
	github.com/bsm/redislock v0.10.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redlock-proxy/redlock-proxy v0.0.0
)

require (
	github.com/BurntSushi/toml v1.4.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace github.com/redlock-proxy/redlock-proxy => ../..
