package proxy

// redisMatch reports whether s matches the glob pattern as Redis matches
// key patterns (stringmatchlen in Redis's util.c, case-sensitive, as ACL
// key patterns and KEYS use it): '*' any run of bytes, '?' one byte,
// "[…]" a class ('^' negates it, "a-z" a range, '\' escapes), '\' escapes
// the next byte. Byte for byte as Redis reads them, its oddities included:
// an unclosed '[' class ends with the pattern, and the ends of a range
// compare as C's signed chars.
func redisMatch(pattern, s []byte) bool {
	skip := false
	return matchFrom(pattern, s, &skip)
}

// matchFrom is stringmatchlen_impl; *skip is its skipLongerMatches: once
// the rest of the pattern after a '*' matched nowhere in the rest of s, no
// earlier '*' can make it match by taking more (which keeps patterns such
// as "a*a*a*a*b" from taking exponential time).
func matchFrom(p, s []byte, skip *bool) bool {
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for len(s) > 0 {
				if matchFrom(p[1:], s, skip) {
					return true
				}
				if *skip {
					return false
				}
				s = s[1:]
			}
			*skip = true
			return false
		case '?':
			s = s[1:]
		case '[':
			p = p[1:]
			not := len(p) > 0 && p[0] == '^'
			if not {
				p = p[1:]
			}
			match := false
			for {
				if len(p) >= 2 && p[0] == '\\' {
					p = p[1:]
					if p[0] == s[0] {
						match = true
					}
				} else if len(p) > 0 && p[0] == ']' {
					break
				} else if len(p) == 0 {
					// Unclosed: the class ends with the pattern (Redis
					// steps back onto the last byte, consumed below).
					break
				} else if len(p) >= 3 && p[1] == '-' {
					start, end, c := int8(p[0]), int8(p[2]), int8(s[0])
					if start > end {
						start, end = end, start
					}
					p = p[2:]
					if c >= start && c <= end {
						match = true
					}
				} else if p[0] == s[0] {
					match = true
				}
				p = p[1:]
			}
			if not {
				match = !match
			}
			if !match {
				return false
			}
			s = s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		if len(p) > 0 { // empty only after an unclosed class
			p = p[1:]
		}
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			break
		}
	}
	return len(p) == 0 && len(s) == 0
}
