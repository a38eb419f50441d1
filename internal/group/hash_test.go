package group

import "testing"

func TestPartitionForMatchesJava(t *testing.T) {
	// Java: "test".hashCode() == 3556498; "polygenelubricants".hashCode() == Integer.MIN_VALUE.
	if h := javaStringHash("test"); h != 3556498 {
		t.Fatalf("hash %d", h)
	}
	if h := javaStringHash("polygenelubricants"); h != -1<<31 {
		t.Fatalf("hash %d", h)
	}
	if p := partitionFor("polygenelubricants", 50); p != 0 {
		t.Fatalf("Utils.abs(MIN_VALUE) must be 0, got partition %d", p)
	}
	if p := partitionFor("test", 50); p != 3556498%50 {
		t.Fatalf("partition %d", p)
	}
}
