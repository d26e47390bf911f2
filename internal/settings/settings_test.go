package settings

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// the settings of the table the tests load, each with its default.
type dest struct {
	text, raw, named string
	list             []string
	flag             bool
	port             int
	count            int64
	small            int32
	price            float64
}

func table(d *dest) []Setting {
	return []Setting{
		Text("TEXT", "fallback", &d.text),
		RawText("RAW", &d.raw),
		Bool("FLAG", &d.flag, "a boolean"),
		Port("PORT", &d.port),
		Int("COUNT", &d.count, 0, math.MaxInt64, "a whole number from 0 (0: no limit)"),
		Int("SMALL", &d.small, 1, math.MaxInt32, "a whole number from 1 to 2147483647; ignored"),
		Float("PRICE", &d.price, 0, 1e6, "a price in US dollars from 0 to 1e6"),
		{Name: "NAMED", Set: func(v string) error {
			if v == "other" {
				return &Problem{Name: "OTHER", Err: errors.New("is refused")}
			}
			d.named = v
			return nil
		}},
		{Name: "LIST", Set: func(v string) error {
			var bad []error
			for _, item := range strings.Split(v, ",") {
				if item != "ok" {
					bad = append(bad, fmt.Errorf("%q is not ok", item))
					continue
				}
				d.list = append(d.list, item)
			}
			return errors.Join(bad...)
		}},
	}
}

func defaults() dest { return dest{port: 8080, count: 5, small: 7, price: 1} }

func TestLoad(t *testing.T) {
	cases := []struct {
		name     string
		env      map[string]string
		want     func(*dest) // the settings taken, from defaults()
		problems []string
	}{
		{"unset: the defaults", nil, func(d *dest) { d.text = "fallback" }, nil},
		{"blank: unset", map[string]string{"TEXT": "  ", "PORT": " ", "COUNT": "\t"}, func(d *dest) { d.text = "fallback" }, nil},
		{"trimmed but the raw one", map[string]string{"TEXT": " a ", "RAW": " p ", "PORT": " 9090 "}, func(d *dest) { d.text, d.raw, d.port = "a", " p ", 9090 }, nil},
		{"every kind", map[string]string{"FLAG": "true", "COUNT": "0", "SMALL": "2147483647", "PRICE": "0.04", "NAMED": "x"},
			func(d *dest) {
				d.text, d.flag, d.count, d.small, d.price, d.named = "fallback", true, 0, math.MaxInt32, 0.04, "x"
			}, nil},
		{"each bad value named, the others taken", map[string]string{"FLAG": "yes please", "PORT": "65536", "COUNT": "-1", "SMALL": "2147483648", "PRICE": "NaN", "TEXT": "t"},
			func(d *dest) { d.text = "t" },
			[]string{`FLAG="yes please" is not a boolean`, `PORT="65536" is not a port number`, `COUNT="-1" is not a whole number from 0 (0: no limit)`,
				`SMALL="2147483648" is not a whole number from 1 to 2147483647; ignored`, `PRICE="NaN" is not a price in US dollars from 0 to 1e6`}},
		{"a port of 0, a fraction, infinity", map[string]string{"PORT": "0", "COUNT": "1.5", "PRICE": "+Inf"}, func(d *dest) { d.text = "fallback" },
			[]string{`PORT="0" is not a port number`, `COUNT="1.5" is not`, `PRICE="+Inf" is not`}},
		{"a problem naming another setting", map[string]string{"NAMED": "other"}, func(d *dest) { d.text = "fallback" }, []string{"OTHER=is refused"}},
		{"a problem each of a list's items", map[string]string{"LIST": "a,ok,b"}, func(d *dest) { d.text, d.list = "fallback", []string{"ok"} },
			[]string{`LIST="a" is not ok`, `LIST="b" is not ok`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, want := defaults(), defaults()
			problems := Load(envOf(c.env), table(&got))
			c.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("loaded %+v, want %+v", got, want)
			}
			if len(problems) != len(c.problems) {
				t.Fatalf("problems %v, want %d", problems, len(c.problems))
			}
			for i, p := range problems {
				if !strings.HasPrefix(p.Error(), c.problems[i]) {
					t.Errorf("problem %d: %q, want %q", i, p.Error(), c.problems[i])
				}
			}
			err := Check(envOf(c.env), table(new(dest)))
			if (err == nil) != (len(c.problems) == 0) || err != nil && err.Error() != problems[0].Error() {
				t.Errorf("Check: %v, want the first problem of %v", err, problems)
			}
		})
	}
}

// FuzzLoad: any value of any setting is taken or refused with a problem
// naming its setting and quoting it, and a refused one leaves the default.
func FuzzLoad(f *testing.F) {
	for _, v := range []string{"", " 1 ", "true", "-1", "65535", "1e6", "NaN", "0x10", "other", "\x00"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, name := range []string{"FLAG", "PORT", "COUNT", "SMALL", "PRICE"} {
			got := defaults()
			problems := Load(envOf(map[string]string{name: v}), table(&got))
			want := defaults()
			want.text = "fallback"
			if len(problems) > 1 {
				t.Fatalf("%s=%q: problems %v", name, v, problems)
			}
			if len(problems) == 1 {
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s=%q refused, but loaded %+v", name, v, got)
				}
				if p := problems[0].Error(); !strings.HasPrefix(p, name+"="+strconv.Quote(strings.TrimSpace(v))+" is not ") {
					t.Errorf("%s=%q: problem %q does not name the setting and its value", name, v, p)
				}
			}
			if got.port < 1 || got.port > 65535 || got.count < 0 || got.small < 1 || !(got.price >= 0 && got.price <= 1e6) {
				t.Errorf("%s=%q: loaded %+v, out of range", name, v, got)
			}
		}
	})
}
