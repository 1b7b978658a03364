package flowfile

import (
	"fmt"
	"io"
	"os"

	"github.com/goccy/go-yaml/scanner"
	"github.com/goccy/go-yaml/token"
)

// MaxFileSize bounds a workflow file: 256 KiB, far above what one workflow needs (the
// examples are a few KB; an HTML e-mail body written inline some tens of KB). Reading a
// file costs memory linear in its size, and this keeps that cost small for every file a
// directory holds.
const MaxFileSize = 256 << 10

// MaxDepth bounds how deeply lists and mappings nest in a workflow file: 64 levels, the
// depth a run's input may have (onceflow.Config.MaxInputDepth). A step takes five or six
// of them; the rest is for the bodies of messages. The YAML parser needs memory quadratic
// in the depth (20 KB of "[[[…" took 357 MB), so the depth is measured on the tokens
// before the parser builds its tree.
const MaxDepth = 64

// tokenize reads src into YAML tokens, refusing a file larger than MaxFileSize, nested
// deeper than MaxDepth or holding more than MaxNodes values (aliases not yet expanded:
// checkNodes counts them once there is a tree). The tokens are those the parser reads, so the depth counted is the
// depth the parser would build: a bracket inside a quoted string is part of the string
// for both.
func tokenize(file string, src []byte) (token.Tokens, *Problem) {
	if len(src) > MaxFileSize {
		return nil, sizeProblem(file)
	}
	var s scanner.Scanner
	s.Init(string(src))
	var tokens token.Tokens
	for {
		sub, err := s.Scan()
		tokens.Add(sub...)
		if err != nil { // io.EOF, or an invalid token the parser reports
			break
		}
	}
	if p := checkDepth(file, tokens); p != nil {
		return nil, p
	}
	if p := checkValues(file, tokens); p != nil {
		return nil, p
	}
	return tokens, nil
}

// checkValues returns a problem at the token past which the file holds more than MaxNodes
// values. Each key, scalar, alias and collection is counted; punctuation is not, so a
// file is never refused here that checkNodes, which counts every node, would accept.
func checkValues(file string, tokens token.Tokens) *Problem {
	n := 0
	for _, tk := range tokens {
		switch tk.Type {
		case token.CollectEntryType, token.MappingValueType, token.SequenceEndType, token.MappingEndType,
			token.CommentType, token.SpaceType, token.DocumentHeaderType, token.DocumentEndType, token.DirectiveType:
			continue
		}
		if n++; n > MaxNodes {
			p := &Problem{File: file, Message: fmt.Sprintf("this file holds more than %d values; a workflow file needs far fewer", MaxNodes)}
			if tk.Position != nil {
				p.Line, p.Col = tk.Position.Line, tk.Position.Column
			}
			return p
		}
	}
	return nil
}

func sizeProblem(file string) *Problem {
	return &Problem{File: file, Message: fmt.Sprintf(
		"the file holds more than %d bytes (%d KiB), the most a workflow file may hold; split it into several workflows, or shorten its long texts", MaxFileSize, MaxFileSize>>10)}
}

// level is a block collection that is open at a column: a mapping, or a sequence (whose
// entries may stand at the column of the key that holds it: "key:\n- item").
type level struct {
	col int
	seq bool
}

// checkDepth returns a problem at the first token at which flow collections ([…], {…})
// and block collections (by indentation, and "- - x" on one line) nest deeper than
// MaxDepth.
func checkDepth(file string, tokens token.Tokens) *Problem {
	var (
		blocks  []level
		flow    int
		line    = -1
		compact bool // the previous token opened a node on its line: "-" or "?"
	)
	for _, tk := range tokens {
		if tk.Position == nil {
			continue
		}
		pos := tk.Position
		switch tk.Type {
		case token.CommentType:
			continue
		case token.DocumentHeaderType, token.DocumentEndType:
			blocks, flow, compact, line = blocks[:0], 0, true, pos.Line
			continue
		}
		first := pos.Line != line
		line = pos.Line
		if flow == 0 && (first || compact) && tk.Type != token.AnchorType {
			seq := tk.Type == token.SequenceEntryType
			if first {
				for len(blocks) > 0 && blocks[len(blocks)-1].col > pos.Column {
					blocks = blocks[:len(blocks)-1]
				}
				if n := len(blocks); n > 0 && blocks[n-1].col == pos.Column && blocks[n-1].seq && !seq && n > 1 && blocks[n-2].col == pos.Column {
					blocks = blocks[:n-1] // the next key of the mapping that held the sequence
				}
			}
			n := len(blocks)
			switch {
			case n == 0 || blocks[n-1].col < pos.Column:
				blocks = append(blocks, level{pos.Column, seq})
			case blocks[n-1].col == pos.Column && seq && !blocks[n-1].seq:
				blocks = append(blocks, level{pos.Column, true})
			}
		}
		switch tk.Type {
		case token.SequenceEntryType, token.MappingKeyType:
			compact = flow == 0
		case token.AnchorType:
		default:
			compact = false
		}
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			flow++
		case token.SequenceEndType, token.MappingEndType:
			if flow > 0 {
				flow--
			}
		}
		if d := len(blocks) + flow; d > MaxDepth {
			return &Problem{File: file, Line: pos.Line, Col: pos.Column, Message: fmt.Sprintf(
				"lists and mappings nest more than %d levels deep here; a workflow file needs far fewer (remove the extra nesting)", MaxDepth)}
		}
	}
	return nil
}

// readFile reads a workflow file, and no more of it than MaxFileSize and one byte: a file
// that is too large is refused without being read whole.
func readFile(path string) ([]byte, *Problem) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Problem{File: path, Message: err.Error()}
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &Problem{File: path, Message: err.Error()}
	}
	if len(src) > MaxFileSize {
		return nil, sizeProblem(path)
	}
	return src, nil
}
