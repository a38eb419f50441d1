package broker

import (
	"sync"
	"sync/atomic"
)

// partitionWorkers is how many partitions open or close at once. Both are bound by fsyncs
// and small reads (a log's clean-shutdown marker, its final flush, the producer-state
// snapshot), which overlap in the kernel and the device however few cores there are: one
// by one, 20,000 partitions took 33 s to close.
const partitionWorkers = 32

// parallel calls fn(0), ..., fn(n-1) on up to workers goroutines and returns each call's
// error at its index.
func parallel(n, workers int, fn func(i int) error) []error {
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				errs[i] = fn(i)
			}
		})
	}
	wg.Wait()
	return errs
}

// firstError is the first non-nil error of errs, or nil.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
