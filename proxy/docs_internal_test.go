package proxy

import (
	"encoding"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The documentation keeps up with the code: every key the configuration
// parser accepts is named in docs/configuration.md, and every command the
// dispatch tables name is in docs/commands.md.

// readDoc reads a page of docs/, relative to this package's directory
// (where go test runs).
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()

// tomlKeys lists the keys of a TOML-decoded struct type, dotted under
// prefix: a nested table or array of tables ([[proxy.users]]) adds its
// name to the path of its fields; a field tagged "-" is not read from the
// file. Types that decode themselves from text (Duration, Size) are keys.
func tomlKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		key := tag
		if prefix != "" {
			key = prefix + "." + tag
		}
		ft := f.Type
		for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(textUnmarshaler) {
			keys = append(keys, tomlKeys(ft, key)...)
			continue
		}
		keys = append(keys, key)
	}
	return keys
}

func TestDocsNameEveryConfigKey(t *testing.T) {
	doc := readDoc(t, "configuration.md")
	keys := tomlKeys(reflect.TypeOf(Config{}), "")
	if len(keys) < 40 {
		t.Fatalf("only %d keys found in Config: %v", len(keys), keys)
	}
	for _, k := range keys {
		if !strings.Contains(doc, k) {
			t.Errorf("docs/configuration.md does not name the setting %s", k)
		}
	}
}

// commandNames lists every command (and admin subcommand) of the command
// table.
func commandNames() []string {
	seen := map[string]bool{}
	for _, e := range table {
		seen[e.name] = true
		for _, sub := range e.adminSubs {
			seen[sub] = true
		}
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// namesCommand reports whether text names the command, as a word, in any
// case: GET is not named by GETDEL.
func namesCommand(text, name string) bool {
	re := regexp.MustCompile(`(?i)(^|[^a-z0-9_.])` + regexp.QuoteMeta(name) + `($|[^a-z0-9_])`)
	return re.MatchString(text)
}

func TestDocsNameEveryCommand(t *testing.T) {
	doc := readDoc(t, "commands.md")
	names := commandNames()
	if len(names) < 60 {
		t.Fatalf("only %d commands found in the command table: %v", len(names), names)
	}
	for _, name := range names {
		if !namesCommand(doc, name) {
			t.Errorf("docs/commands.md does not name the command %s", strings.ToUpper(name))
		}
	}
}

// docSection is the text of the section of a page under a "## " heading,
// up to the next.
func docSection(t *testing.T, doc, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("docs/commands.md has no section %q", heading)
	}
	text, _, _ := strings.Cut(rest, "\n## ")
	return text
}

// Each row of the command table is named in the section of
// docs/commands.md that says where the command is served.
func TestDocsPlaceEveryCommand(t *testing.T) {
	doc := readDoc(t, "commands.md")
	sections := map[where]string{
		onQuorum:  "On a lock key: quorum operations",
		answered:  "Answered by the proxy",
		onOwnConn: "On a backend connection",
		onBackend: "On a backend connection",
		refused:   "Refused",
		adminCmd:  "Refused",
	}
	for _, e := range table {
		heading := sections[e.where]
		switch {
		case heading == "":
			t.Errorf("%s: a row with no place (where %d)", e.name, e.where)
			continue
		case e.has(fPubSub):
			heading = "Pub/sub"
		case e.has(fDataBeside):
			heading = "Data beside locks"
		}
		if !namesCommand(docSection(t, doc, heading), e.name) {
			t.Errorf("docs/commands.md does not name %s under %q, where the command table serves it", strings.ToUpper(e.name), heading)
		}
	}
}
