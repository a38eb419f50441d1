package decodecost

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzCheck: on any body, Check never panics; it accepts exactly what kmsg's ReadFrom
// accepts; and when it accepts, ReadFrom allocates no more than the bound it returned.
// The request is picked by index into kmsg's keys, and the version modulo its range, so
// every mutation names a real request.
func FuzzCheck(f *testing.F) {
	keys := requestKeys()
	rng := rand.New(rand.NewPCG(3, 4))
	for i, key := range keys {
		maxVersion := kmsg.RequestForKey(key).MaxVersion()
		for _, v := range []int16{0, maxVersion / 2, maxVersion} {
			f.Add(uint8(i), uint8(v), randomRequest(rng, key, v))
		}
	}
	for _, h := range hostileBodies() {
		for i, key := range keys {
			if key == h.key {
				f.Add(uint8(i), uint8(h.version), h.body)
			}
		}
	}
	f.Fuzz(func(t *testing.T, keyIndex, versionByte uint8, body []byte) {
		key := keys[int(keyIndex)%len(keys)]
		version := int16(versionByte) % (kmsg.RequestForKey(key).MaxVersion() + 1)
		bound, err := Check(key, version, body)
		if err != nil { // most mutations: no need to measure, only to agree
			req := kmsg.RequestForKey(key)
			req.SetVersion(version)
			if req.ReadFrom(body) == nil {
				t.Fatalf("%s v%d: Check error %v, kmsg ReadFrom accepts", kmsg.NameForKey(key), version, err)
			}
			return
		}
		measured, readErr := readFromAlloc(key, version, body)
		if readErr != nil {
			t.Fatalf("%s v%d: Check accepts, kmsg ReadFrom error %v", kmsg.NameForKey(key), version, readErr)
		}
		if measured > bound+measureSlackBytes {
			t.Fatalf("%s v%d: ReadFrom allocated %d bytes, Check bound %d", kmsg.NameForKey(key), version, measured, bound)
		}
	})
}

// requestKeys is every request key kmsg decodes, ascending.
func requestKeys() []int16 {
	var keys []int16
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		if kmsg.RequestForKey(key) != nil {
			keys = append(keys, key)
		}
	}
	return keys
}
