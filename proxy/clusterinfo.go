package proxy

import (
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/redcon"

	"github.com/redlock-proxy/redlock-proxy/proxy/wire"
)

// INFO on a cluster backend (the sections the proxy passes on from its
// backend: info.go's backendInfo) runs on every primary, and the answers
// are merged into one, so that the proxy's INFO describes the whole
// keyspace as one Redis would:
//
//   - Keyspace: each database's keys and expires summed, avg_ttl the
//     average of the nodes' weighted by their expires;
//   - Stats: every numeric field summed (the counters, and the rates
//     instantaneous_*), but expired_stale_perc averaged and the fields
//     that describe a current state (io_threads_active,
//     current_eviction_exceeded_time, current_active_defrag_time) the
//     largest of the nodes';
//   - Errorstats and Commandstats: the counts and times summed,
//     usec_per_call computed again from the sums;
//   - the other sections (Persistence, Replication, CPU, Modules, Cluster,
//     Latencystats) as the first primary answers them.

// infoMax are the Stats fields merged as the largest of the nodes'.
var infoMax = map[string]bool{"io_threads_active": true, "current_eviction_exceeded_time": true, "current_active_defrag_time": true}

// infoSection is one section of INFO's text, read from several nodes: each
// field's values, the fields in the order they were first seen.
type infoSection struct {
	head   string // "# Stats"
	fields []string
	vals   map[string][]string
}

// mergeInfo merges the INFO replies of every primary (raw) into one, as a
// bulk string, or in RESP3 a verbatim string. An error reply is the reply.
func mergeInfo(replies [][]byte, resp3 bool) ([]byte, error) {
	var order []*infoSection
	by := map[string]*infoSection{}
	for _, r := range replies {
		v, err := wire.ParseValue(r)
		text, ok := v.(string)
		if err != nil || !ok {
			return r, nil
		}
		var cur *infoSection
		for _, line := range strings.Split(text, "\r\n") {
			if strings.HasPrefix(line, "# ") {
				if cur = by[line]; cur == nil {
					cur = &infoSection{head: line, vals: map[string][]string{}}
					by[line] = cur
					order = append(order, cur)
				}
				continue
			}
			k, val, ok := strings.Cut(line, ":")
			if cur == nil || !ok {
				continue
			}
			if _, seen := cur.vals[k]; !seen {
				cur.fields = append(cur.fields, k)
			}
			cur.vals[k] = append(cur.vals[k], val)
		}
	}
	var b strings.Builder
	for i, sec := range order {
		if i > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString(sec.head)
		b.WriteString("\r\n")
		name := strings.ToLower(strings.TrimPrefix(sec.head, "# "))
		for _, k := range sec.fields {
			vals := sec.vals[k]
			val := vals[0]
			switch name {
			case "stats":
				val = mergeStat(k, vals)
			case "keyspace", "errorstats", "commandstats":
				val = mergePairs(vals)
			}
			b.WriteString(k)
			b.WriteByte(':')
			b.WriteString(val)
			b.WriteString("\r\n")
		}
	}
	if resp3 {
		out := append([]byte{'='}, strconv.Itoa(b.Len()+4)...)
		out = append(out, "\r\ntxt:"...)
		out = append(out, b.String()...)
		return append(out, '\r', '\n'), nil
	}
	return redcon.AppendBulkString(nil, b.String()), nil
}

// mergeStat merges the values of a Stats field: summed when numeric (as
// an integer when every value is one), averaged or the largest for the
// fields that are no count, else the first node's.
func mergeStat(field string, vals []string) string {
	ints, floats := true, true
	var isum, imax int64
	var fsum, fmax float64
	for i, v := range vals {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			ints = false
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			floats = false
			break
		}
		isum += n
		fsum += f
		if i == 0 || n > imax {
			imax = n
		}
		if i == 0 || f > fmax {
			fmax = f
		}
	}
	switch {
	case !floats:
		return vals[0]
	case field == "expired_stale_perc":
		return strconv.FormatFloat(fsum/float64(len(vals)), 'f', 2, 64)
	case infoMax[field] && ints:
		return strconv.FormatInt(imax, 10)
	case infoMax[field]:
		return strconv.FormatFloat(fmax, 'f', 2, 64)
	case ints:
		return strconv.FormatInt(isum, 10)
	}
	return strconv.FormatFloat(fsum, 'f', 2, 64)
}

// mergePairs merges the values of a field made of k=v pairs
// (db0:keys=1,expires=0,avg_ttl=0; cmdstat_get:calls=2,usec=3,…): the
// numbers summed, avg_ttl weighted by expires, usec_per_call computed from
// the summed usec and calls; a pair that is not a number the first node's.
func mergePairs(vals []string) string {
	var keys []string
	sums := map[string]float64{}
	ints := map[string]bool{}
	text := map[string]string{}
	var ttlWeighted float64
	for _, v := range vals {
		pairs := map[string]float64{}
		for _, p := range strings.Split(v, ",") {
			k, x, _ := strings.Cut(p, "=")
			if _, seen := text[k]; !seen {
				keys = append(keys, k)
				text[k] = x
				ints[k] = true
			}
			f, err := strconv.ParseFloat(x, 64)
			if err != nil {
				ints[k] = false
				continue
			}
			if _, err := strconv.ParseInt(x, 10, 64); err != nil {
				ints[k] = false
			}
			pairs[k] = f
			sums[k] += f
		}
		ttlWeighted += pairs["avg_ttl"] * pairs["expires"]
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		x, summed := text[k], sums[k]
		switch {
		case k == "avg_ttl":
			if sums["expires"] > 0 {
				x = strconv.FormatInt(int64(math.Round(ttlWeighted/sums["expires"])), 10)
			}
		case k == "usec_per_call":
			if sums["calls"] > 0 {
				x = strconv.FormatFloat(sums["usec"]/sums["calls"], 'f', 2, 64)
			}
		case ints[k]:
			x = strconv.FormatInt(int64(summed), 10)
		default:
			if _, err := strconv.ParseFloat(x, 64); err == nil {
				x = strconv.FormatFloat(summed, 'f', 2, 64)
			}
		}
		out = append(out, k+"="+x)
	}
	return strings.Join(out, ",")
}
