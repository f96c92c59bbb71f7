package main

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

const metaV1 = "k8s.io/apimachinery/pkg/apis/meta/v1"

// apiPackage is one <group>/<version> package of API types.
type apiPackage struct {
	dir        string
	importPath string
	group      string
	version    string
	doc        string // the package comment, markers left out
	types      map[string]*apiType
	files      map[string]*ast.File // by file name, for each type's imports
	documented []*apiType           // in the order the pages list them
}

// page is the file name of the package's reference page.
func (p *apiPackage) page() string { return p.group + "-" + p.version + ".md" }

// apiType is one named type of an API package.
type apiType struct {
	pkg     *apiPackage
	name    string
	doc     string
	markers []string
	spec    *ast.TypeSpec
	file    *ast.File
	consts  []*doc.Value
	pos     token.Position
	listed  bool // on its page, reached from a kind
}

// kind reports whether the type is a kind's root (it embeds TypeMeta) and
// not a list of them.
func (t *apiType) kind() bool {
	st, ok := t.spec.Type.(*ast.StructType)
	if !ok || strings.HasSuffix(t.name, "List") {
		return false
	}
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 {
			if p, n := t.qualified(f.Type); p == metaV1 && n == "TypeMeta" {
				return true
			}
		}
	}
	return false
}

// qualified resolves a type expression (pointers and slices looked
// through) to the import path and name of the type it names; the import
// path is empty for a builtin and the package's own for a local type.
func (t *apiType) qualified(e ast.Expr) (string, string) {
	switch x := e.(type) {
	case *ast.StarExpr:
		return t.qualified(x.X)
	case *ast.ArrayType:
		return t.qualified(x.Elt)
	case *ast.Ident:
		if _, ok := t.pkg.types[x.Name]; ok {
			return t.pkg.importPath, x.Name
		}
		return "", x.Name
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			return importPathOf(t.file, id.Name), x.Sel.Name
		}
	}
	return "", ""
}

// importPathOf returns the import path a file's import name stands for.
func importPathOf(f *ast.File, name string) string {
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if imp.Name != nil && imp.Name.Name == name || imp.Name == nil && path.Base(p) == name {
			return p
		}
	}
	return ""
}

// field is one JSON field of a struct, with inlined structs flattened.
type field struct {
	name     string
	typ      ast.Expr
	owner    *apiType // the type whose file the field's type is written in
	doc      string
	markers  []string
	optional bool
}

// fields lists a struct type's JSON fields in order: embedded TypeMeta is
// left out (the kind's heading gives apiVersion and kind), a local struct
// with json ",inline" is replaced by its fields.
func (t *apiType) fields() ([]field, error) {
	st, ok := t.spec.Type.(*ast.StructType)
	if !ok {
		return nil, nil
	}
	var out []field
	for _, f := range st.Fields.List {
		tag := ""
		if f.Tag != nil {
			s, _ := strconv.Unquote(f.Tag.Value)
			tag = reflect.StructTag(s).Get("json")
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || len(f.Names) > 0 && !f.Names[0].IsExported() {
			continue
		}
		p, n := t.qualified(f.Type)
		if len(f.Names) == 0 && p == metaV1 && n == "TypeMeta" {
			continue
		}
		if name == "" && strings.Contains(opts, "inline") {
			inner, ok := t.pkg.types[n]
			if p != t.pkg.importPath || !ok {
				return nil, fmt.Errorf("%s: inlined field of type %s.%s: only a struct of the same package can be inlined", t.pos, p, n)
			}
			innerFields, err := inner.fields()
			if err != nil {
				return nil, err
			}
			out = append(out, innerFields...)
			continue
		}
		if name == "" {
			return nil, fmt.Errorf("%s: a field of %s has no JSON name", t.pos, t.name)
		}
		text, markers := splitMarkers(f.Doc.Text())
		out = append(out, field{
			name:     name,
			typ:      f.Type,
			owner:    t,
			doc:      text,
			markers:  markers,
			optional: hasMarker(markers, "optional") || !hasMarker(markers, "required") && strings.Contains(opts, "omitempty"),
		})
	}
	return out, nil
}

// splitMarkers separates a comment's text from its +marker lines.
func splitMarkers(text string) (string, []string) {
	var lines, markers []string
	for _, l := range strings.Split(text, "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "+"); ok {
			markers = append(markers, m)
			continue
		}
		lines = append(lines, l)
	}
	return strings.TrimSpace(strings.Join(lines, "\n")), markers
}

func hasMarker(markers []string, name string) bool {
	for _, m := range markers {
		if m == name {
			return true
		}
	}
	return false
}

// markerValue returns the value of the first marker "name=value".
func markerValue(markers []string, name string) (string, bool) {
	for _, m := range markers {
		if v, ok := strings.CutPrefix(m, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// loadPackages parses every <group>/<version> directory under apis.
func loadPackages(apis, module string) ([]*apiPackage, error) {
	groups, err := os.ReadDir(apis)
	if err != nil {
		return nil, err
	}
	var pkgs []*apiPackage
	for _, g := range groups {
		if !g.IsDir() {
			continue
		}
		versions, err := os.ReadDir(filepath.Join(apis, g.Name()))
		if err != nil {
			return nil, err
		}
		for _, v := range versions {
			if !v.IsDir() {
				continue
			}
			dir := filepath.Join(apis, g.Name(), v.Name())
			p, err := loadPackage(dir, module+"/"+filepath.ToSlash(dir), v.Name())
			if err != nil {
				return nil, err
			}
			pkgs = append(pkgs, p)
		}
	}
	return pkgs, nil
}

func loadPackage(dir, importPath, version string) (*apiPackage, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &apiPackage{dir: dir, importPath: importPath, version: version, types: map[string]*apiType{}, files: map[string]*ast.File{}}
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || strings.HasPrefix(n, "zz_generated") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		p.files[filepath.Join(dir, n)] = f
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no Go files", dir)
	}
	dp, err := doc.NewFromFiles(fset, files, importPath, doc.AllDecls|doc.PreserveAST)
	if err != nil {
		return nil, err
	}
	var pkgMarkers []string
	p.doc, pkgMarkers = splitMarkers(dp.Doc)
	for _, dt := range dp.Types {
		for _, s := range dt.Decl.Specs {
			ts := s.(*ast.TypeSpec)
			if ts.Name.Name != dt.Name {
				continue
			}
			pos := fset.Position(ts.Pos())
			text, markers := splitMarkers(dt.Doc)
			p.types[dt.Name] = &apiType{
				pkg: p, name: dt.Name, doc: text, markers: markers, spec: ts,
				file: p.files[pos.Filename], consts: dt.Consts, pos: pos,
			}
		}
	}
	p.group, _ = markerValue(pkgMarkers, "groupName")
	if p.group == "" {
		p.group = groupVersionGroup(dp)
	}
	if p.group == "" {
		return nil, fmt.Errorf("%s: no +groupName marker and no GroupVersion variable naming the group", dir)
	}
	return p, nil
}

// groupVersionGroup finds the group of a package without a +groupName
// marker from its GroupVersion variable, a schema.GroupVersion literal
// whose Group is a string or a constant of the package.
func groupVersionGroup(dp *doc.Package) string {
	consts := map[string]string{}
	for _, v := range dp.Consts {
		for _, s := range v.Decl.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					if bl, ok := vs.Values[i].(*ast.BasicLit); ok && bl.Kind == token.STRING {
						consts[n.Name], _ = strconv.Unquote(bl.Value)
					}
				}
			}
		}
	}
	for _, v := range dp.Vars {
		for _, s := range v.Decl.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if n.Name != "GroupVersion" || i >= len(vs.Values) {
					continue
				}
				cl, ok := vs.Values[i].(*ast.CompositeLit)
				if !ok {
					continue
				}
				for _, el := range cl.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok || fmt.Sprint(kv.Key) != "Group" {
						continue
					}
					switch val := kv.Value.(type) {
					case *ast.BasicLit:
						g, _ := strconv.Unquote(val.Value)
						return g
					case *ast.Ident:
						return consts[val.Name]
					}
				}
			}
		}
	}
	return ""
}

// document decides which types each page lists, and in which order: every
// kind (in source order) and then, breadth first, every API type a listed
// type's fields name, on the page of that type's package. A local struct
// only ever inlined is listed nowhere: its fields are its users'.
func document(pkgs []*apiPackage) error {
	byPath := map[string]*apiPackage{}
	for _, p := range pkgs {
		byPath[p.importPath] = p
	}
	var queue []*apiType
	add := func(t *apiType) {
		if !t.listed {
			t.listed = true
			t.pkg.documented = append(t.pkg.documented, t)
			queue = append(queue, t)
		}
	}
	for _, p := range pkgs {
		var kinds []*apiType
		for _, t := range p.types {
			if t.kind() {
				kinds = append(kinds, t)
			}
		}
		sort.Slice(kinds, func(i, j int) bool { return positionLess(kinds[i].pos, kinds[j].pos) })
		for _, k := range kinds {
			add(k)
		}
	}
	if len(queue) == 0 {
		return fmt.Errorf("no kinds found (a struct embedding %s.TypeMeta)", metaV1)
	}
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		fields, err := t.fields()
		if err != nil {
			return err
		}
		for _, f := range fields {
			for _, e := range typeNames(f.typ) {
				if ip, n := f.owner.qualified(e); byPath[ip] != nil {
					if u, ok := byPath[ip].types[n]; ok {
						add(u)
					}
				}
			}
		}
	}
	return nil
}

// typeNames lists the named types a type expression uses (a map's key and
// value, a slice's element, a pointer's target).
func typeNames(e ast.Expr) []ast.Expr {
	switch x := e.(type) {
	case *ast.StarExpr:
		return typeNames(x.X)
	case *ast.ArrayType:
		return typeNames(x.Elt)
	case *ast.MapType:
		return append(typeNames(x.Key), typeNames(x.Value)...)
	case *ast.Ident, *ast.SelectorExpr:
		return []ast.Expr{x}
	}
	return nil
}

func positionLess(a, b token.Position) bool {
	if a.Filename != b.Filename {
		return a.Filename < b.Filename
	}
	return a.Offset < b.Offset
}
