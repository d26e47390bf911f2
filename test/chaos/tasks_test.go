package chaos

import (
	"reflect"
	"testing"
)

func TestGenerateTasksIsSeededAndMixed(t *testing.T) {
	a, b := GenerateTasks(42, 200), GenerateTasks(42, 200)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different tasks")
	}
	if reflect.DeepEqual(a, GenerateTasks(43, 200)) {
		t.Fatal("different seeds, same tasks")
	}
	var io, failing, ignored, cancelled int
	execs := map[int]int{}
	for _, tk := range a {
		ex := tk.Spec["executors"].([]any)
		execs[len(ex)]++
		if _, ok := tk.Spec["inputs"]; ok {
			io++
		}
		for _, e := range ex {
			if v, ok := e.(map[string]any)["ignore_error"]; ok {
				failing++
				if v.(bool) {
					ignored++
				}
			}
		}
		want := "COMPLETE"
		for i, e := range ex {
			e := e.(map[string]any)
			if v, ok := e["ignore_error"]; ok && !v.(bool) {
				want = "EXECUTOR_ERROR"
			}
			if e["image"] == "fate.tesk.test/forever" && (!tk.Cancel || i != len(ex)-1) {
				t.Errorf("%s: executor %d runs forever but the task is not cancelled after it", tk.Name, i)
			}
		}
		if tk.Cancel {
			cancelled++
			if want != "COMPLETE" || ex[len(ex)-1].(map[string]any)["image"] != "fate.tesk.test/forever" {
				t.Errorf("%s: a cancelled task must fail nowhere and run forever last: %v", tk.Name, ex)
			}
			want = "CANCELED"
		}
		if tk.Want != want {
			t.Errorf("%s: Want %s, the spec gives %s", tk.Name, tk.Want, want)
		}
	}
	if len(execs) != 3 || execs[0] != 0 || execs[4] != 0 {
		t.Errorf("executor counts %v, want 1 to 3", execs)
	}
	if io == 0 || failing == 0 || ignored == 0 || ignored == failing || cancelled == 0 {
		t.Errorf("mix: io %d failing %d ignored %d cancelled %d", io, failing, ignored, cancelled)
	}
}
