package readme

import (
	"strings"
	"testing"
)

func TestSplitComment(t *testing.T) {
	for _, c := range []struct{ line, cmd, comment string }{
		{`curl http://$WEB/   # the node`, `curl http://$WEB/   `, "the node"},
		{`kubectl get svc -o jsonpath='{.a#b}' # quoted # stays`, `kubectl get svc -o jsonpath='{.a#b}' `, "quoted # stays"},
		{`echo "a # b"`, `echo "a # b"`, ""},
		{`echo a#b`, `echo a#b`, ""},
		{`echo \# x # y`, `echo \# x `, "y"},
		{`# only a comment`, ``, "only a comment"},
	} {
		cmd, comment := splitComment(c.line)
		if cmd != c.cmd || comment != c.comment {
			t.Errorf("splitComment(%q) = %q, %q; want %q, %q", c.line, cmd, comment, c.cmd, c.comment)
		}
	}
}

// Only blocks from make sandbox to make sandbox-down are walkthroughs; a
// continued command is one step; comment-only lines are not steps.
func TestParseWalkthroughs(t *testing.T) {
	page := "intro\n```sh\nmake sandbox   # two commands\nmake test\n```\n" +
		"```sh\nmake sandbox SANDBOX=nic   # up\nexport X=1\n# a note\nbin/azlb vm \\\n  start n1   # starts\nmake sandbox-down\n```\n" +
		"```go\nmake sandbox\nmake sandbox-down\n```\n"
	blocks, err := Walkthroughs("P.md", strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 1 {
		t.Fatalf("%d walkthroughs, want 1: %+v", len(blocks), blocks)
	}
	b := blocks[0]
	if b.Variant != "nic" || b.File != "P.md" || b.Line != 6 || len(b.Steps) != 4 {
		t.Fatalf("walkthrough %+v", b)
	}
	if got := b.Steps[2]; got.Command != "bin/azlb vm \\\n  start n1" || got.Comment != "starts" || got.Line != 10 {
		t.Errorf("continued step %+v", got)
	}
	if got := b.Steps[2].Key(); got != `bin/azlb vm \ start n1 # starts` {
		t.Errorf("key %q", got)
	}
	if _, err := Walkthroughs("P.md", strings.NewReader("```sh\nmake sandbox\n")); err == nil {
		t.Error("an unclosed block: no error")
	}
}
