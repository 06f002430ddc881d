// Package readme runs README.md's walkthroughs as written: every fenced
// `sh` block that starts the sandbox (`make sandbox ...`) and stops it
// (`make sandbox-down`) is played command by command in a bash session of
// its own, inside a network namespace of its own, on a copy of the
// repository, and each command's documented result is checked.
//
//   - The commands come from README.md itself; the checks are keyed by the
//     whole line (command and comment), so a line that changes without
//     its check, or a check whose line is gone, fails the run.
//   - `make test-readme` (part of `make test`) runs it; it needs root for
//     the network namespace.
package readme

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Block is one walkthrough: a fenced sh block of README.md (or of
// another page of the documentation).
type Block struct {
	// File is the page, relative to the repository root.
	File string
	// Line is the page's line of the opening fence.
	Line int
	// Variant is the SANDBOX= of its `make sandbox` ("" for the default).
	Variant string
	// Steps are its commands, in order.
	Steps []Step
}

// Step is one command of a walkthrough.
type Step struct {
	// Line is its README line (the first, for a continued command).
	Line int
	// Command is what bash runs: the line without its comment.
	Command string
	// Comment is the documented result (the text after an unquoted #).
	Comment string
}

// Key is the step's identity for its check: command and comment with runs
// of blanks collapsed, so re-aligning the comments changes nothing, and
// any other change of either does.
func (s Step) Key() string {
	k := strings.Join(strings.Fields(s.Command), " ")
	if s.Comment != "" {
		k += " # " + strings.Join(strings.Fields(s.Comment), " ")
	}
	return k
}

// Walkthroughs returns a page's walkthrough blocks: the fenced sh blocks
// whose first command is `make sandbox` (with or without SANDBOX=...) and
// that contain `make sandbox-down`. file names the page in errors.
func Walkthroughs(file string, r io.Reader) ([]Block, error) {
	sc := bufio.NewScanner(r)
	var (
		blocks []Block
		cur    *Block
		lineNo int
		cont   *Step // a command continued with a trailing backslash
	)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur == nil {
			if trimmed == "```sh" || trimmed == "```bash" {
				cur = &Block{File: file, Line: lineNo}
			}
			continue
		}
		if trimmed == "```" {
			if cont != nil {
				return nil, fmt.Errorf("%s:%d: the block ends inside a continued command", file, lineNo)
			}
			if b, ok := walkthrough(*cur); ok {
				blocks = append(blocks, b)
			}
			cur = nil
			continue
		}
		cmd, comment := splitComment(line)
		if cont != nil {
			cont.Command += "\n" + cmd
			if comment != "" {
				cont.Comment = strings.TrimSpace(cont.Comment + " " + comment)
			}
		} else {
			if strings.TrimSpace(cmd) == "" {
				continue // a blank or comment-only line
			}
			cur.Steps = append(cur.Steps, Step{Line: lineNo, Command: strings.TrimSpace(cmd), Comment: comment})
			cont = &cur.Steps[len(cur.Steps)-1]
		}
		if strings.HasSuffix(strings.TrimRight(cmd, " \t"), `\`) {
			continue
		}
		cont.Command = strings.TrimSpace(cont.Command)
		cont = nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a fenced block is never closed", file, cur.Line)
	}
	return blocks, nil
}

// walkthrough reports whether a block is a walkthrough, with its variant.
func walkthrough(b Block) (Block, bool) {
	if len(b.Steps) == 0 {
		return b, false
	}
	f := strings.Fields(b.Steps[0].Command)
	if len(f) < 2 || f[0] != "make" || f[1] != "sandbox" {
		return b, false
	}
	for _, arg := range f[2:] {
		if v, ok := strings.CutPrefix(arg, "SANDBOX="); ok {
			b.Variant = v
		}
	}
	for _, s := range b.Steps {
		if strings.Join(strings.Fields(s.Command), " ") == "make sandbox-down" {
			return b, true
		}
	}
	return b, false
}

// splitComment splits a shell line at its comment: a # that starts a word
// outside quotes, as bash reads it.
func splitComment(line string) (cmd, comment string) {
	var quote rune
	escaped := false
	for i, r := range line {
		switch {
		case escaped:
			escaped = false
		case r == '\\' && quote != '\'':
			escaped = true
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i], strings.TrimSpace(line[i+1:])
		}
	}
	return line, ""
}
