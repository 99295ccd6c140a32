package wire

import (
	"bytes"

	"github.com/tidwall/redcon"
)

// errUnbalancedQuotes is Redis's reply to an inline command with an open
// quote.
var errUnbalancedQuotes = &ProtoError{"unbalanced quotes in request"}

// ParseCommands splits b into the whole commands at its start: RESP
// multibulk commands, whose arguments point into b, and inline commands,
// whose arguments are copies. used is the length of those commands; the
// rest of b is an unfinished command. A multibulk command's Raw is its
// bytes in b: as numbers with a leading zero are refused, exactly
// AppendCommand's encoding of its arguments. Inline commands have none. The inputFramer has already checked
// the framing and the limits of these bytes.
func ParseCommands(b []byte) (cmds []redcon.Command, used int, err error) {
	cmds, _, used, err = Parse(b, nil, nil)
	return cmds, used, err
}

// Parse is ParseCommands into the storage of an earlier batch that
// nothing holds any more, when cmds or slab are not nil: the commands are
// appended to cmds, and their arguments taken from slab while they fit. It
// also returns the slab the last arguments came from (nil if none).
func Parse(b []byte, cmds []redcon.Command, slab [][]byte) (_ []redcon.Command, _ [][]byte, used int, err error) {
	// Without a slab to reuse, the first command's arguments get an
	// allocation of their own: most reads hold just one. Those of the
	// commands after it share larger ones (slab), sized for what the rest
	// of b can hold: an argument takes at least 6 bytes ("$0\r\n\r\n").
	for used < len(b) {
		var args [][]byte
		var raw []byte
		var n int
		if b[used] == '*' {
			size := cap(slab)
			if len(cmds) > 0 {
				size = max(size, min(slabArgs, (len(b)-used)/6+1))
			}
			args, slab, n, err = parseMultibulk(b[used:], slab, size)
			raw = b[used : used+n : used+n]
		} else {
			args, n, err = parseInline(b[used:])
		}
		if err != nil {
			return cmds, slab, used, err
		}
		if n == 0 {
			break // unfinished
		}
		if len(args) > 0 {
			if cmds == nil {
				// Room for as many more commands of this one's size as b
				// holds: one for a read of one command.
				cmds = make([]redcon.Command, 0, min(1+(len(b)-used-n)/n, 64))
			}
			cmds = append(cmds, redcon.Command{Raw: raw, Args: args})
		}
		used += n
	}
	return cmds, slab, used, nil
}

// slabArgs is the most arguments one shared allocation holds.
const slabArgs = 64

// parseMultibulk parses one "*count" command at the start of b; n is 0 when
// it has not all arrived. With slabLen > 0, its arguments are taken from
// the free end of slab when they fit there, else from a new slab of
// slabLen, capped so that appending to them cannot reach the next
// command's; slab is returned with them taken. Otherwise they get an
// allocation of their own.
func parseMultibulk(b []byte, slab [][]byte, slabLen int) ([][]byte, [][]byte, int, error) {
	var args [][]byte
	count, i, ok, err := parseHeader(b, 0, errMultibulkLen)
	if !ok || err != nil {
		return nil, slab, 0, err
	}
	if count <= 0 || count > maxArgs {
		return nil, slab, 0, errMultibulkLen
	}
	shared := count <= slabLen
	switch {
	case !shared:
		args = make([][]byte, 0, min(count, slabArgs)) // grows with what arrives
	case cap(slab)-len(slab) < count:
		slab = make([][]byte, 0, slabLen)
		fallthrough
	default:
		args = slab[len(slab):]
	}
	for j := 0; j < count; j++ {
		if i >= len(b) {
			return nil, slab, 0, nil
		}
		if b[i] != '$' {
			return nil, slab, 0, errExpectedDollar(b[i])
		}
		size, next, ok, err := parseHeader(b, i, errBulkLen)
		if !ok || err != nil {
			return nil, slab, 0, err
		}
		if size < 0 {
			return nil, slab, 0, errBulkLen
		}
		if len(b)-next < size+2 {
			return nil, slab, 0, nil
		}
		if b[next+size] != '\r' || b[next+size+1] != '\n' {
			return nil, slab, 0, errBulkLen
		}
		args = append(args, b[next:next+size:next+size])
		i = next + size + 2
	}
	if shared {
		args = args[:count:count]
		slab = slab[:len(slab)+count]
	}
	return args, slab, i, nil
}

// parseHeader reads the number after the type byte at b[at] up to CRLF. ok
// is false when the line has not all arrived; next is where the line ends.
func parseHeader(b []byte, at int, bad error) (v, next int, ok bool, err error) {
	end := bytes.IndexByte(b[at:], '\n')
	if end < 0 {
		return 0, 0, false, nil
	}
	end += at
	if end == at || b[end-1] != '\r' {
		return 0, 0, false, bad
	}
	digits := b[at+1 : end-1]
	if len(digits) == 0 || len(digits) > maxHeaderDigits || (digits[0] == '0' && len(digits) > 1) {
		return 0, 0, false, bad // a leading zero too, as Redis refuses it
	}
	neg := digits[0] == '-'
	if neg {
		digits = digits[1:]
		if len(digits) == 0 {
			return 0, 0, false, bad
		}
	}
	for _, c := range digits {
		if c < '0' || c > '9' || v > (1<<62)/10 {
			return 0, 0, false, bad
		}
		v = v*10 + int(c-'0')
	}
	if neg {
		v = -v
	}
	return v, end + 1, true, nil
}

// parseInline parses one inline command line, splitting it as Redis does
// on spaces, with "double" or 'single' quoted arguments (\n, \r, \t and
// escaped quotes inside them). n is 0 when the line has not all arrived.
func parseInline(b []byte) (args [][]byte, n int, err error) {
	end := bytes.IndexByte(b, '\n')
	if end < 0 {
		return nil, 0, nil
	}
	line := b[:end]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	for len(line) > 0 {
		if line[0] == ' ' {
			line = line[1:]
			continue
		}
		var arg []byte
		if q := line[0]; q == '"' || q == '\'' {
			i, esc, closed := 1, false, false
			for ; i < len(line); i++ {
				c := line[i]
				switch {
				case esc:
					esc = false
					switch c {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					}
					arg = append(arg, c)
				case c == '\\':
					esc = true
				case c == q:
					closed = true
				default:
					arg = append(arg, c)
				}
				if closed {
					break
				}
			}
			if !closed || (i+1 < len(line) && line[i+1] != ' ') {
				return nil, 0, errUnbalancedQuotes
			}
			if arg == nil {
				arg = []byte{}
			}
			line = line[i+1:]
		} else {
			i := bytes.IndexByte(line, ' ')
			if i < 0 {
				i = len(line)
			}
			if bytes.ContainsAny(line[1:i], `"'`) {
				return nil, 0, errUnbalancedQuotes // a quote inside a word
			}
			arg = append([]byte(nil), line[:i]...)
			line = line[i:]
		}
		args = append(args, arg)
	}
	return args, end + 1, nil
}
