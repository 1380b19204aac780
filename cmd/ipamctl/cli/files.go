package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vmipam/vmipam/internal/manifest"
)

// document is one manifest read from a file.
type document struct {
	// source says where it came from: the file, with the document's index when the file has
	// several ("vms.yaml#1", from 0).
	source     string
	json       json.RawMessage
	apiVersion string
	kind       string
	name       string
}

// readDocuments reads every document of the given files, in order: YAML or JSON, several per
// file separated by "---", items of a List flattened. A directory stands for its *.yaml,
// *.yml and *.json files, with recursive also those of its subdirectories (kubectl's -R);
// "-" is standard input.
func readDocuments(paths []string, recursive bool, stdin io.Reader) ([]document, error) {
	var out []document
	for _, p := range paths {
		files, err := expand(p, recursive)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			docs, err := readFile(f, stdin)
			if err != nil {
				return nil, err
			}
			out = append(out, docs...)
		}
	}
	return out, nil
}

// expand lists a directory's manifest files (recursive: in lexical order of their paths), or
// returns p itself.
func expand(p string, recursive bool) ([]string, error) {
	if p == "-" {
		return []string{p}, nil
	}
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	if recursive {
		return walkManifests(p)
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && isManifest(e.Name()) {
			out = append(out, filepath.Join(p, e.Name()))
		}
	}
	return out, nil
}

// walkManifests lists the manifest files under dir, at any depth.
func walkManifests(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && isManifest(p) {
			out = append(out, p)
		}
		return err
	})
	return out, err
}

// isManifest: a YAML or JSON file by its name.
func isManifest(name string) bool {
	ext := filepath.Ext(name)
	return ext == ".yaml" || ext == ".yml" || ext == ".json"
}

func readFile(name string, stdin io.Reader) ([]document, error) {
	var (
		data []byte
		err  error
	)
	if name == "-" {
		data, err = io.ReadAll(stdin)
		name = "<stdin>"
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, err
	}
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for i := range docs {
		docs[i].source = name
		if len(docs) > 1 {
			docs[i].source += "#" + strconv.Itoa(i)
		}
	}
	return docs, nil
}

// splitDocuments splits a YAML or JSON stream into documents, flattening Lists and dropping
// empty documents.
func splitDocuments(data []byte) ([]document, error) {
	docs, err := manifest.Split(data)
	if err != nil {
		return nil, err
	}
	var out []document
	for _, doc := range docs {
		flat, err := flatten(doc.JSON)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc.Index, err)
		}
		out = append(out, flat...)
	}
	return out, nil
}

// flatten returns a document, the items of a List, or nothing for an empty document.
func flatten(js []byte) ([]document, error) {
	if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if head.Kind != "List" && !strings.HasSuffix(head.Kind, "List") || head.Items == nil {
		return []document{{json: js, apiVersion: head.APIVersion, kind: head.Kind, name: head.Metadata.Name}}, nil
	}
	var out []document
	for _, item := range head.Items {
		docs, err := flatten(item)
		if err != nil {
			return nil, err
		}
		out = append(out, docs...)
	}
	return out, nil
}

// sources remembers where the documents of a request came from, to point error paths of the
// request body (vm…, policies[i]…, objects[i]…) back at files.
type sources struct {
	vm       string
	policies []string
	objects  []string
}

var requestPath = regexp.MustCompile(`^(?:spec\.)?(vm|policies\[(\d+)\]|objects\[(\d+)\])(?:\.(.*))?$`)

// locate turns a request field path into "<file>: <path within the object>".
func (s sources) locate(field string) string {
	m := requestPath.FindStringSubmatch(field)
	if m == nil {
		return field
	}
	src := s.vm
	switch {
	case m[2] != "":
		src = pick(s.policies, m[2])
	case m[3] != "":
		src = pick(s.objects, m[3])
	}
	if src == "" {
		return field
	}
	if m[4] == "" {
		return src
	}
	return src + ": " + m[4]
}

func pick(list []string, index string) string {
	i, err := strconv.Atoi(index)
	if err != nil || i < 0 || i >= len(list) {
		return ""
	}
	return list[i]
}

// ofKind splits docs into those of the given kind and the rest.
func ofKind(docs []document, kind string) (match, rest []document) {
	for _, d := range docs {
		if d.kind == kind {
			match = append(match, d)
		} else {
			rest = append(rest, d)
		}
	}
	return match, rest
}

func sourcesOf(docs []document) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.source
	}
	return out
}

func raws(docs []document) []json.RawMessage {
	out := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		out[i] = d.json
	}
	return out
}

// kinds names the distinct kinds of docs, for messages.
func kinds(docs []document) string {
	var out []string
	for _, d := range docs {
		k := d.kind
		if k == "" {
			k = "<no kind>"
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return strings.Join(out, ", ")
}
