package brokerproc

import "testing"

func TestField(t *testing.T) {
	line := `time=2026-01-02T03:04:05Z level=INFO msg="exactq serving" listen=127.0.0.1:40123 advertised=127.0.0.1:40123 data_dir="/tmp/a b" fsync=always`
	for k, want := range map[string]string{"listen": "127.0.0.1:40123", "data_dir": "/tmp/a b", "fsync": "always", "missing": ""} {
		if got := field(line, k); got != want {
			t.Errorf("field(%q) = %q, want %q", k, got, want)
		}
	}
}
