package flowfile

import (
	"reflect"
	"regexp"
	"sort"
	"strings"
)

var envFieldRE = regexp.MustCompile(`\{env\.([A-Za-z0-9_-]+)\}`)

// EnvNames returns the environment variables the definition reads, sorted: those its
// templates name as {env.NAME}, those its fields name as settings ending in _env (a
// webhook's secret_env) and those its steps' kinds name directly (a sql step's database). Which of them are secrets is SecretNames' rule; the others are
// configuration, such as a base URL, shown in errors (see MaskedValues).
func (d *Definition) EnvNames() []string {
	names := map[string]bool{}
	var walk func(v reflect.Value, envField bool)
	walk = func(v reflect.Value, envField bool) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem(), envField)
			}
		case reflect.Struct:
			t := v.Type()
			for i := range t.NumField() {
				f := t.Field(i)
				if !f.IsExported() {
					continue
				}
				tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				walk(v.Field(i), strings.HasSuffix(tag, "_env"))
			}
		case reflect.Map:
			for _, k := range v.MapKeys() {
				walk(v.MapIndex(k), envField)
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i), envField)
			}
		case reflect.String:
			s := v.String()
			if envField && envNameRE.MatchString(s) {
				names[s] = true
			}
			for _, m := range envFieldRE.FindAllStringSubmatch(s, -1) {
				names[m[1]] = true
			}
		}
	}
	walk(reflect.ValueOf(d).Elem(), false)
	for _, u := range d.allUses() {
		if u.env {
			names[u.src] = true
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// allUses is every use the walks of the definition's steps and notify channels reported.
func (d *Definition) allUses() []use {
	var out []use
	for _, s := range d.Steps {
		out = append(out, s.uses...)
		out = append(out, s.notifyUses...)
	}
	out = append(out, d.notifyUses...)
	return append(out, d.triggerUses...)
}
