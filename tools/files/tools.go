package files

import (
	"encoding/json"
	"fmt"

	"tollgate/prompt"
)

// ruleFields are the fields the operator's rules match on every file
// tool: the path (segment by segment) and its root.
var ruleFields = []prompt.Field{{Name: "path", Kind: prompt.FieldPath}, {Name: "root", Kind: prompt.FieldText}}

func (f *Files) buildTools() ([]*prompt.Tool, error) {
	roots := "Paths start with a root's name: " + f.describeRoots() + "."
	read, err := prompt.NewTool(ToolRead,
		"Read a text file. Long files come in parts: offset and limit count lines. "+roots,
		nil, f.readInvoke)
	if err != nil {
		return nil, err
	}
	list, err := prompt.NewTool(ToolList,
		"List a folder: its files with their sizes, folders and links. "+roots,
		nil, f.listInvoke)
	if err != nil {
		return nil, err
	}
	search, err := prompt.NewTool(ToolSearch,
		"Find lines containing a text (or matching a regular expression) in the text files under a folder, as path:line: text. "+roots,
		nil, f.searchInvoke)
	if err != nil {
		return nil, err
	}
	write, err := prompt.NewTool(ToolWrite,
		"Create a file or replace its whole content, in a read-write root. A person approves the change, seeing its diff. "+roots,
		f.writeGate, f.writeInvoke)
	if err != nil {
		return nil, err
	}
	edit, err := prompt.NewTool(ToolEdit,
		"Replace one exact occurrence of a text in a file, in a read-write root. A person approves the change, seeing its diff. "+roots,
		f.editGate, f.editInvoke)
	if err != nil {
		return nil, err
	}
	for _, t := range []*prompt.Tool{read, list, search} {
		t.Effect = prompt.EffectRead
	}
	write.Effect, edit.Effect = prompt.EffectWrite, prompt.EffectWrite
	write.Scope, edit.Scope = f.scope("writes to"), f.scope("edits of")
	tools := []*prompt.Tool{read, list, search, write, edit}
	for _, t := range tools {
		t.Fields, t.Derive = ruleFields, f.derive
	}
	return tools, nil
}

// inputPath is the path of any file tool's input.
func inputPath(input json.RawMessage) (string, error) {
	var in struct {
		Path string `json:"path"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return "", fmt.Errorf("decode input: %w", err)
	}
	return in.Path, nil
}

func (f *Files) derive(input json.RawMessage) (map[string]string, error) {
	p, err := inputPath(input)
	if err != nil {
		return nil, err
	}
	t, err := f.resolve(p)
	if err != nil {
		return nil, err
	}
	return map[string]string{"path": t.show, "root": t.root.Name}, nil
}

// scope makes an "always" cover one path exactly.
func (f *Files) scope(what string) func(json.RawMessage) (prompt.Scope, error) {
	return func(input json.RawMessage) (prompt.Scope, error) {
		p, err := inputPath(input)
		if err != nil {
			return prompt.Scope{}, err
		}
		t, err := f.resolve(p)
		if err != nil {
			return prompt.Scope{}, err
		}
		return prompt.Scope{Key: "path:" + t.show, Label: what + " " + t.show}, nil
	}
}
