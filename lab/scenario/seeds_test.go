package scenario

import "testing"

// TestEverySeedHasAScenario: every seed a scenario names is explained,
// and every seed is reproduced by a scenario (catches a seed number in a
// table that the report cannot explain).
func TestEverySeedHasAScenario(t *testing.T) {
	known := map[string]bool{}
	for _, s := range Seeds() {
		known[s.ID] = true
		if len(s.Scenarios) == 0 || s.Source == "" || s.Adds == "" {
			t.Errorf("seed %s: %+v", s.ID, s)
		}
	}
	for _, d := range scenarioDefs {
		for _, id := range d.seeds {
			if !known[id] {
				t.Errorf("scenario %s names seed %s, which Seeds does not explain", d.name, id)
			}
		}
	}
}
