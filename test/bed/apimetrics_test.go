package bed

import "testing"

func TestCounts(t *testing.T) {
	before := Counts{"POST pods": 10, "GET pods": 3, "APPLY builds/status": 1}
	after := Counts{"POST pods": 14, "GET pods": 3, "APPLY builds/status": 3, "WATCH pods": 1, "DELETE pods": 2}
	d := after.Sub(before)
	want := Counts{"POST pods": 4, "APPLY builds/status": 2, "WATCH pods": 1, "DELETE pods": 2}
	if len(d) != len(want) {
		t.Fatalf("Sub = %v, want %v", d, want)
	}
	for k, v := range want {
		if d[k] != v {
			t.Errorf("Sub[%q] = %v, want %v", k, d[k], v)
		}
	}
	if w := d.Writes(); w != 8 {
		t.Errorf("Writes = %v, want 8 (POST, APPLY and DELETE; not WATCH)", w)
	}
	if got, want := d.String(), "       4 POST pods\n       2 APPLY builds/status\n       2 DELETE pods\n       1 WATCH pods\n"; got != want {
		t.Errorf("String =\n%s\nwant\n%s", got, want)
	}
	if got, want := (Counts{"etcd": 0.5}).String(), "    0.50 etcd\n"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}
