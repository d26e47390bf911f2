package main

import (
	"errors"
	"fmt"
	"strings"
)

// shortTask is the short form of submit: one executor and its files.
type shortTask struct {
	name, description, image, workdir string
	inputs, outputs, env, tags        []string
	cpu                               int
	ram, disk                         float64
}

// build makes the tesTask of the short form.
func (s shortTask) build(command []string) (map[string]any, error) {
	if s.image == "" {
		return nil, errors.New("the short form needs --image and a command after --")
	}
	if len(command) == 0 {
		return nil, errors.New("no command: give it after --, e.g. tesctl submit --image alpine -- echo hello")
	}
	ex := map[string]any{"image": s.image, "command": command}
	if s.workdir != "" {
		ex["workdir"] = s.workdir
	}
	if len(s.env) > 0 {
		env, err := pairs("--env", s.env, false)
		if err != nil {
			return nil, err
		}
		ex["env"] = env
	}
	t := map[string]any{"executors": []any{ex}}
	if s.name != "" {
		t["name"] = s.name
	}
	if s.description != "" {
		t["description"] = s.description
	}
	var ins, outs []any
	for _, in := range s.inputs {
		// URL=PATH: the path is after the last "=" (a URL may hold one).
		i := strings.LastIndex(in, "=")
		if i <= 0 || i == len(in)-1 {
			return nil, fmt.Errorf("--input %q: want URL=PATH, e.g. s3://bucket/in.txt=/data/in.txt", in)
		}
		ins = append(ins, map[string]any{"url": in[:i], "path": in[i+1:]})
	}
	for _, out := range s.outputs {
		// PATH=URL: the path is before the first "=".
		i := strings.Index(out, "=")
		if i <= 0 || i == len(out)-1 {
			return nil, fmt.Errorf("--output %q: want PATH=URL, e.g. /data/out.txt=s3://bucket/out.txt", out)
		}
		outs = append(outs, map[string]any{"path": out[:i], "url": out[i+1:]})
	}
	if ins != nil {
		t["inputs"] = ins
	}
	if outs != nil {
		t["outputs"] = outs
	}
	if len(s.tags) > 0 {
		tags, err := pairs("--tag", s.tags, true)
		if err != nil {
			return nil, err
		}
		t["tags"] = tags
	}
	res := map[string]any{}
	if s.cpu > 0 {
		res["cpu_cores"] = s.cpu
	}
	if s.ram > 0 {
		res["ram_gb"] = s.ram
	}
	if s.disk > 0 {
		res["disk_gb"] = s.disk
	}
	if len(res) > 0 {
		t["resources"] = res
	}
	return t, nil
}

// pairs reads K=V flags; emptyValue allows K alone (the value "").
func pairs(flag string, list []string, emptyValue bool) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" || (!ok && !emptyValue) {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE", flag, kv)
		}
		m[k] = v
	}
	return m, nil
}
