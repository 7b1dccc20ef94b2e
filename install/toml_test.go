package install

import (
	"strings"
	"testing"
)

func TestTopLevel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    string
		keys   []string
		texts  []string // src[Start:End] of each entry
		header string   // text from the first header on
	}{
		{"empty", "", nil, nil, ""},
		{"keys then header", "version = 3\nroot = \"/var\"\n\n[plugins]\n  a = 1\n",
			[]string{"version", "root"}, []string{"version = 3\n", "root = \"/var\"\n"}, "[plugins]\n  a = 1\n"},
		{"comments and indentation", "# c\n  version=2 # v\n\t# x = 1\nimports = []",
			[]string{"version", "imports"}, []string{"  version=2 # v\n", "imports = []"}, ""},
		{"multi-line array with tricky strings", "imports = [\n  \"/a/]#\", # ] comment\n  '/b[',\n]\nversion = 3\n[x]\n",
			[]string{"imports", "version"}, []string{"imports = [\n  \"/a/]#\", # ] comment\n  '/b[',\n]\n", "version = 3\n"}, "[x]\n"},
		{"escaped quote", "a = \"x\\\"]\"\nb = 1\n", []string{"a", "b"}, []string{"a = \"x\\\"]\"\n", "b = 1\n"}, ""},
		{"multi-line string", "a = \"\"\"\n[not a header]\n\"\"\"\nb = '''x\n'''\n[t]\n",
			[]string{"a", "b"}, []string{"a = \"\"\"\n[not a header]\n\"\"\"\n", "b = '''x\n'''\n"}, "[t]\n"},
		{"inline table and quoted key", "\"imports\" = { a = [1, 2] }\n[[arr]]\n", []string{"imports"}, []string{"\"imports\" = { a = [1, 2] }\n"}, "[[arr]]\n"},
		{"crlf", "version = 3\r\n[p]\r\n", []string{"version"}, []string{"version = 3\r\n"}, "[p]\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entries, hdr := topLevel([]byte(tc.src))
			if len(entries) != len(tc.keys) {
				t.Fatalf("entries = %+v, want keys %q", entries, tc.keys)
			}
			for i, e := range entries {
				if e.Key != tc.keys[i] || tc.src[e.Start:e.End] != tc.texts[i] {
					t.Errorf("entry %d = %q %q, want %q %q", i, e.Key, tc.src[e.Start:e.End], tc.keys[i], tc.texts[i])
				}
			}
			if tc.src[hdr:] != tc.header {
				t.Errorf("header part = %q, want %q", tc.src[hdr:], tc.header)
			}
		})
	}
}

func TestAddRemoveImport(t *testing.T) {
	const g = "/etc/containerd/conf.d/*.toml"
	for _, tc := range []struct {
		name, src, want string
	}{
		{"no imports", "version = 3\nroot = \"/r\"\n[plugins]\n",
			"version = 3\n# swiftctl install containerd added this entry for \"" + g + "\"\nimports = [\"" + g + "\"]\nroot = \"/r\"\n[plugins]\n"},
		{"no imports, no final newline", "version = 3",
			"version = 3\n# swiftctl install containerd added this entry for \"" + g + "\"\nimports = [\"" + g + "\"]\n"},
		{"empty imports", "version = 3\nimports = []\n\n[plugins]\n",
			"version = 3\n# swiftctl install containerd added \"" + g + "\" to this entry, which was:\n#| imports = []\nimports = [\"" + g + "\"]\n\n[plugins]\n"},
		{"multi-line imports with a comment", "version = 2\nimports = [\n  \"/x/*.conf\", # mine\n  \"/y.toml\",\n]\n",
			"version = 2\n# swiftctl install containerd added \"" + g + "\" to this entry, which was:\n#| imports = [\n#|   \"/x/*.conf\", # mine\n#|   \"/y.toml\",\n#| ]\nimports = [\"/x/*.conf\", \"/y.toml\", \"" + g + "\"]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := addImport([]byte(tc.src), g)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("addImport:\n%s", UnifiedDiff("root", []byte(tc.want), got))
			}
			if _, err := parseTOML("after", got); err != nil {
				t.Fatalf("result does not parse: %v", err)
			}
			back, removed, err := removeImport(got)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.src
			if !strings.HasSuffix(want, "\n") {
				want += "\n"
			}
			if removed != g || string(back) != want {
				t.Errorf("removeImport = %q, %q; want %q, %q", back, removed, want, g)
			}
		})
	}
}

// An imports entry edited after install keeps the operator's entries.
func TestRemoveImportAfterEdits(t *testing.T) {
	const g = "/c/conf.d/*.toml"
	for _, tc := range []struct {
		name, src, want, removed string
	}{
		{"added entry extended by operator",
			"version = 3\n# swiftctl install containerd added this entry for \"" + g + "\"\nimports = [\"/o.toml\", \"" + g + "\"]\n",
			"version = 3\nimports = [\"/o.toml\"]\n", g},
		{"extended entry edited by operator",
			"version = 3\n# swiftctl install containerd added \"" + g + "\" to this entry, which was:\n#| imports = []\nimports = [\"" + g + "\", \"/new.toml\"]\n",
			"version = 3\nimports = [\"/new.toml\"]\n", g},
		{"no marker", "version = 3\nimports = [\"" + g + "\"]\n", "version = 3\nimports = [\"" + g + "\"]\n", ""},
		{"no imports", "version = 3\n", "version = 3\n", ""},
		{"marker not above the entry", "# swiftctl install containerd added this entry for \"" + g + "\"\nversion = 3\nimports = [\"" + g + "\"]\n",
			"# swiftctl install containerd added this entry for \"" + g + "\"\nversion = 3\nimports = [\"" + g + "\"]\n", ""},
		{"garbled marker", "version = 3\n# swiftctl install containerd added this entry for nothing\nimports = [\"" + g + "\"]\n",
			"version = 3\n# swiftctl install containerd added this entry for nothing\nimports = [\"" + g + "\"]\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, removed, err := removeImport([]byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want || removed != tc.removed {
				t.Errorf("removeImport = %q, %q; want %q, %q", got, removed, tc.want, tc.removed)
			}
		})
	}
}

func TestUnifiedDiff(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new []byte
		want     string
	}{
		{"equal", []byte("a\n"), []byte("a\n"), ""},
		{"create", nil, []byte("a\nb\n"), "--- /dev/null\n+++ f\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"remove", []byte("a\n"), nil, "--- f\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-a\n"},
		{"insert in the middle", []byte("1\n2\n3\n4\n5\n6\n7\n8\n"), []byte("1\n2\n3\n4\nX\n5\n6\n7\n8\n"),
			"--- f\n+++ f\n@@ -2,6 +2,7 @@\n 2\n 3\n 4\n+X\n 5\n 6\n 7\n"},
		{"two hunks", []byte("a\n1\n2\n3\n4\n5\n6\n7\nb\n"), []byte("A\n1\n2\n3\n4\n5\n6\n7\nB\n"),
			"--- f\n+++ f\n@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n 3\n@@ -6,4 +6,4 @@\n 5\n 6\n 7\n-b\n+B\n"},
		{"close changes share a hunk", []byte("a\n1\n2\nb\n"), []byte("A\n1\n2\nB\n"),
			"--- f\n+++ f\n@@ -1,4 +1,4 @@\n-a\n+A\n 1\n 2\n-b\n+B\n"},
		{"no final newline", []byte("a"), []byte("b"), "--- f\n+++ f\n@@ -1,1 +1,1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := UnifiedDiff("f", tc.old, tc.new); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
