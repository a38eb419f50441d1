package coordlog

import "testing"

// Java's String.hashCode: "test" = 3556498, "hello" = 99162322; "Aa" and "BB" collide at
// 2112; "😀" is two UTF-16 units (0xD83D 0xDE00) = 1772899; "polygenelubricants" hashes to
// Integer.MIN_VALUE, which Utils.abs maps to 0.
func TestPartitionForMatchesJava(t *testing.T) {
	for s, want := range map[string]int32{"test": 3556498, "abc": 96354, "polygenelubricants": -1 << 31} {
		if h := JavaStringHash(s); h != want {
			t.Errorf("JavaStringHash(%q) = %d, want %d", s, h, want)
		}
	}
	cases := []struct {
		key  string
		hash int64
	}{
		{"test", 3556498}, {"hello", 99162322}, {"Aa", 2112}, {"BB", 2112}, {"😀", 1772899}, {"", 0}, {"polygenelubricants", 0},
	}
	for _, c := range cases {
		if got := PartitionFor(c.key, 50); int64(got) != c.hash%50 {
			t.Errorf("PartitionFor(%q, 50) = %d, want %d", c.key, got, c.hash%50)
		}
	}
}
