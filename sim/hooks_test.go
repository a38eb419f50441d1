package sim

import (
	"reflect"
	"sync"
	"unsafe"

	"github.com/exactq/exactq/txn"
)

// The transaction coordinator's test mode (no ticker goroutine, the caller ticks and waits
// for background work) is unexported in package txn, and this package may not edit txn.
// These three hooks reach it from outside; they break loudly (panic at start-up, or a
// link error) if txn renames the field or method, rather than silently running the
// coordinator on a wall-clock ticker.

// setManualTicks turns off the coordinator's ticker goroutine (Config.manualTicks).
func setManualTicks(cfg *txn.Config) {
	f := reflect.ValueOf(cfg).Elem().FieldByName("manualTicks")
	if !f.IsValid() || f.Kind() != reflect.Bool {
		panic("sim: txn.Config.manualTicks not found")
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetBool(true)
}

// coordWork is the coordinator's WaitGroup of background work (marker jobs,
// coordinator-initiated aborts): waiting on it makes every step run to quiescence.
func coordWork(c *txn.Coordinator) *sync.WaitGroup {
	f := reflect.ValueOf(c).Elem().FieldByName("work")
	if !f.IsValid() || f.Type() != reflect.TypeOf(sync.WaitGroup{}) {
		panic("sim: txn.Coordinator.work not found")
	}
	return (*sync.WaitGroup)(unsafe.Pointer(f.UnsafeAddr()))
}

// coordTick runs the coordinator's ticker body once: due marker retries, timed-out
// transaction aborts, id expiration.
//
//go:linkname coordTick github.com/exactq/exactq/txn.(*Coordinator).tick
func coordTick(c *txn.Coordinator)
