package lockscripts

import (
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// builtinTOML declares the libraries' lock scripts in the vocabulary of
// [[scripts]].
//
//go:embed builtin.toml
var builtinTOML string

// builtin maps the digest of a normalised library script (see Normalize)
// to its operation; wireSHAs maps the true SHA1 of each exact text a
// library sends to the same operation. Both are read from builtinTOML at
// start and never change.
var builtin, wireSHAs = mustParseBuiltin(builtinTOML)

// builtinEntry is an entry of builtin.toml: a Config keyed by digests and
// wire SHA1s instead of a file.
type builtinEntry struct {
	Name     string   `toml:"name"`
	Digests  []string `toml:"digests"`
	WireSHAs []string `toml:"wire_shas"`
	Config
}

func mustParseBuiltin(src string) (byDigest, bySHA map[string]*Spec) {
	byDigest, bySHA, err := parseBuiltin(src)
	if err != nil {
		panic("lockscripts: builtin.toml: " + err.Error())
	}
	return byDigest, bySHA
}

// parseBuiltin reads a table of built-in scripts: each entry's operation
// through Config.Spec, as an operator's [[scripts]] entry, under each of
// its digests and wire SHA1s.
func parseBuiltin(src string) (byDigest, bySHA map[string]*Spec, err error) {
	var f struct {
		Scripts []builtinEntry `toml:"scripts"`
	}
	md, err := toml.Decode(src, &f)
	if err != nil {
		return nil, nil, err
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, nil, fmt.Errorf("unknown key %s", und[0])
	}
	byDigest, bySHA = map[string]*Spec{}, map[string]*Spec{}
	for i, e := range f.Scripts {
		sp, err := e.spec(byDigest, bySHA)
		if err != nil {
			return nil, nil, fmt.Errorf("scripts[%d] (%s): %w", i, e.Name, err)
		}
		for _, d := range e.Digests {
			byDigest[d] = sp
		}
		for _, sha := range e.WireSHAs {
			bySHA[sha] = sp
		}
	}
	return byDigest, bySHA, nil
}

func (e builtinEntry) spec(byDigest, bySHA map[string]*Spec) (*Spec, error) {
	switch {
	case e.Name == "":
		return nil, fmt.Errorf("name is missing")
	case e.File != "":
		return nil, fmt.Errorf("file: a built-in script is known by its digests")
	case len(e.Digests) == 0:
		return nil, fmt.Errorf("digests: at least one is needed")
	}
	if err := checkSHA1s("digests", e.Digests, byDigest); err != nil {
		return nil, err
	}
	if err := checkSHA1s("wire_shas", e.WireSHAs, bySHA); err != nil {
		return nil, err
	}
	return e.Spec(e.Name)
}

// checkSHA1s refuses a value of key that is not a SHA1 in lower-case hex,
// or that is listed twice, here or by an entry before.
func checkSHA1s(key string, vs []string, seen map[string]*Spec) error {
	for i, v := range vs {
		if len(v) != 40 || strings.Trim(v, "0123456789abcdef") != "" {
			return fmt.Errorf("%s: %q is not a SHA1 in lower-case hex", key, v)
		}
		if sp, ok := seen[v]; ok {
			return fmt.Errorf("%s: %s is already %q's", key, v, sp.Name)
		}
		if slices.Contains(vs[:i], v) {
			return fmt.Errorf("%s: %s is listed twice", key, v)
		}
	}
	return nil
}

// Builtin returns the operation of a library script the proxy knows, by
// its text; nil for any other text, and for one it does not recognise.
func Builtin(src string) *Spec {
	d, err := Digest(src)
	if err != nil {
		return nil
	}
	return builtin[d]
}

// BySHA returns the operation of a library script known by the true SHA1
// of the text the library sends, in any case; nil for any other SHA1.
func BySHA(sha string) *Spec { return wireSHAs[strings.ToLower(sha)] }

// WireSHAs lists the true SHA1 of every library text BySHA knows, sorted.
func WireSHAs() []string { return slices.Sorted(maps.Keys(wireSHAs)) }
