package engine

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"time"
)

// Two clients in front of the same masters with different settings (other
// masters, another quorum, other lock keys, a guard off) are two lock
// services that exclude nothing between them. Each client given its
// settings (WithSettings) publishes them on every master at each periodic
// check, in a hash of digests to their text and expiry on the master's
// clock, and reads those of the others; Client.OtherSettings lists the
// texts of those that differ, and each new one is logged.

// ClientsKey is the hash where clients publish their settings;
// FenceStatePrefix reserves it.
const ClientsKey = FenceStatePrefix + "clients"

// settingsLife is how many check intervals a client's published settings
// outlive its last check.
const settingsLife = 10

// WithSettings publishes, on every master, that this client runs with the
// settings summary (a text that should name whatever two clients of the
// same masters must agree on), and reports clients that publish another
// (Client.OtherSettings). Default: nothing is published.
func WithSettings(summary string) Option {
	return func(o *options) {
		sum := sha1.Sum([]byte(summary))
		o.settings, o.settingsID = summary, hex.EncodeToString(sum[:8])
	}
}

// settingsScript publishes ARGV[1] = ARGV[3] (the digest and text of this
// client's settings) with an expiry ARGV[2] ms from now in KEYS[1], drops
// expired entries, and answers the texts of the others.
var settingsScript = newScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], (now + tonumber(ARGV[2])) .. ' ' .. ARGV[3])
local out = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local exp, text = string.match(all[i + 1], '^(%d+) (.*)$')
  if exp == nil or tonumber(exp) < now then
    redis.call('HDEL', KEYS[1], all[i])
  elseif all[i] ~= ARGV[1] then
    table.insert(out, text)
  end
end
return out`)

// publishSettings publishes this client's settings on the master through
// its pipeline and records the others it reports.
func (n *node) publishSettings(ctx context.Context, every time.Duration) {
	if n.isDown() {
		return
	}
	life := (settingsLife * every).Milliseconds()
	cmd := n.call(ctx, &call{script: settingsScript, keys: []string{n.books().client}, args: []any{n.opts.settingsID, life, n.opts.settings}, readOnly: true})
	vals, err := cmd.StringSlice()
	if err != nil {
		return
	}
	slices.Sort(vals)
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, v := range vals {
		if !slices.Contains(n.others, v) {
			n.logf("redlock: master %s also serves a client with other settings: %s; this client's: %s. Clients of the same masters with different settings do not exclude each other's locks", n.addr, v, n.opts.settings)
		}
	}
	n.others = vals
}

// OtherSettings lists the settings published on any master, at the last
// check, by clients whose settings differ from this one's (WithSettings):
// empty when they all agree.
func (c *Client) OtherSettings() []string {
	var out []string
	for _, n := range c.members() {
		n.mu.Lock()
		for _, v := range n.others {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		n.mu.Unlock()
	}
	slices.Sort(out)
	return out
}
