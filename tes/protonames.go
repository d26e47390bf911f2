package tes

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// TES 1.1 is written in protocol buffers, and its JSON mapping (protojson,
// as Funnel and other servers built on the .proto read a task) accepts each
// field under its lowerCamelCase JSON name as well as its proto name:
// Funnel's own example tasks ask for "ramGb" and "diskGb". A create request
// may use either; both for one field is an error, as in protojson.

// protoAliases are the lowerCamelCase names of a task's fields whose proto
// names differ, by the object they belong to.
var protoAliases = struct{ task, resources, output, executor map[string]string }{
	task:      map[string]string{"creationTime": "creation_time"},
	resources: map[string]string{"cpuCores": "cpu_cores", "ramGb": "ram_gb", "diskGb": "disk_gb", "backendParameters": "backend_parameters", "backendParametersStrict": "backend_parameters_strict"},
	output:    map[string]string{"pathPrefix": "path_prefix"},
	executor:  map[string]string{"ignoreError": "ignore_error"},
}

// protoNames rewrites the lowerCamelCase field names of a task's JSON to
// their proto names. A body without any is returned as it is; one that does
// not decode is left to the strict decoder, which says why.
func protoNames(body []byte) ([]byte, error) {
	if !hasAlias(body) {
		return body, nil
	}
	var task map[string]json.RawMessage
	if err := json.Unmarshal(body, &task); err != nil {
		return body, nil
	}
	if err := rename(task, protoAliases.task, ""); err != nil {
		return nil, err
	}
	if raw, ok := task["resources"]; ok {
		var r map[string]json.RawMessage
		if json.Unmarshal(raw, &r) == nil && r != nil {
			if err := rename(r, protoAliases.resources, "resources."); err != nil {
				return nil, err
			}
			task["resources"] = mustMarshal(r)
		}
	}
	for field, aliases := range map[string]map[string]string{"outputs": protoAliases.output, "executors": protoAliases.executor} {
		raw, ok := task[field]
		if !ok {
			continue
		}
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			continue
		}
		for i, item := range items {
			var obj map[string]json.RawMessage
			if json.Unmarshal(item, &obj) != nil || obj == nil {
				continue
			}
			if err := rename(obj, aliases, field+"["+strconv.Itoa(i)+"]."); err != nil {
				return nil, err
			}
			items[i] = mustMarshal(obj)
		}
		task[field] = mustMarshal(items)
	}
	return mustMarshal(task), nil
}

func hasAlias(body []byte) bool {
	for _, m := range []map[string]string{protoAliases.task, protoAliases.resources, protoAliases.output, protoAliases.executor} {
		for alias := range m {
			if bytes.Contains(body, []byte(`"`+alias+`"`)) {
				return true
			}
		}
	}
	return false
}

func rename(obj map[string]json.RawMessage, aliases map[string]string, where string) error {
	for alias, name := range aliases {
		v, ok := obj[alias]
		if !ok {
			continue
		}
		if _, both := obj[name]; both {
			return bad("%s%s and %s%s are the same field, given twice", where, name, where, alias)
		}
		delete(obj, alias)
		obj[name] = v
	}
	return nil
}

func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		// Raw messages that decoded marshal again.
		panic(err)
	}
	return b
}
