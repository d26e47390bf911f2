package filer

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// netrc holds the machines of a .netrc file (login and password per host),
// as curl and ftp read it. An entry for the host itself comes first; the
// "default" entry, if any, applies to every other host.
type netrc struct {
	machines map[string]netrcEntry
	def      *netrcEntry
}

type netrcEntry struct{ login, password string }

func loadNetrc(file string) (*netrc, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return parseNetrc(string(data))
}

// parseNetrc reads the tokens of a netrc file: machine NAME, default, login,
// password, account, and macdef NAME (whose body runs to an empty line).
func parseNetrc(data string) (*netrc, error) {
	toks, err := netrcTokens(data)
	if err != nil {
		return nil, err
	}
	n := &netrc{machines: map[string]netrcEntry{}}
	var cur *netrcEntry
	var curHost string
	isDefault := false
	flush := func() {
		if cur == nil {
			return
		}
		if isDefault {
			e := *cur
			n.def = &e
		} else if _, seen := n.machines[curHost]; !seen {
			n.machines[curHost] = *cur
		}
		cur = nil
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		arg := func() (string, error) {
			if i+1 >= len(toks) {
				return "", fmt.Errorf("netrc: %q without a value", t)
			}
			i++
			return toks[i], nil
		}
		switch t {
		case "machine":
			flush()
			h, err := arg()
			if err != nil {
				return nil, err
			}
			curHost, isDefault, cur = strings.ToLower(h), false, &netrcEntry{}
		case "default":
			flush()
			curHost, isDefault, cur = "", true, &netrcEntry{}
		case "login", "password", "account":
			v, err := arg()
			if err != nil {
				return nil, err
			}
			if cur == nil {
				continue
			}
			switch t {
			case "login":
				cur.login = v
			case "password":
				cur.password = v
			}
		case "macdef":
			if _, err := arg(); err != nil {
				return nil, err
			}
		}
	}
	flush()
	return n, nil
}

// netrcTokens are the words of a netrc file, its comment lines and the
// bodies of its macros (after "macdef NAME", to an empty line) left out.
func netrcTokens(data string) ([]string, error) {
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var toks []string
	inMacro := false
	for sc.Scan() {
		line := sc.Text()
		if inMacro {
			if strings.TrimSpace(line) == "" {
				inMacro = false
			}
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		fields := strings.Fields(line)
		for i := 0; i < len(fields); i++ {
			if fields[i] == "macdef" {
				// The rest of this line names the macro; its body follows.
				toks = append(toks, fields[i:]...)
				inMacro = true
				break
			}
			toks = append(toks, fields[i])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return toks, nil
}

// lookup returns the credentials for a host (a name without port).
func (n *netrc) lookup(host string) (netrcEntry, bool) {
	if n == nil {
		return netrcEntry{}, false
	}
	if e, ok := n.machines[strings.ToLower(host)]; ok {
		return e, true
	}
	if n.def != nil {
		return *n.def, true
	}
	return netrcEntry{}, false
}

// passwords lists every password of the file, for scrubbing.
func (n *netrc) passwords() []string {
	if n == nil {
		return nil
	}
	var ps []string
	for _, e := range n.machines {
		ps = append(ps, e.password)
	}
	if n.def != nil {
		ps = append(ps, n.def.password)
	}
	return ps
}
