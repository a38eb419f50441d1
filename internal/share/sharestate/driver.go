package sharestate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/coordlog"
)

// Bounds of one round of a driver: it steps at most maxRoundInputs inputs, and stops
// taking more once their appends reach maxRoundBytes, before it writes them.
const (
	maxRoundInputs = 256
	maxRoundBytes  = 1 << 20
)

// driver runs the Core of one __share_group_state partition on one goroutine. Callers
// queue requests; the loop takes a round of them (as many as are waiting, within the
// bounds above), steps each into the Core, appends every batch of the round as one write
// (group commit: one fsync for the round instead of one per request), tells the Core the
// offsets, and only then releases the replies, in input order. A reply therefore never
// shows state that is not durable, and a read queued after a write is answered after that
// write is committed.
//
// When an append fails, the Core has already applied what the log may not hold: every
// reply the failure could touch fails and the Core is rebuilt by replaying the log (the
// log is the truth). If the replay fails too, the partition is unusable and the next
// request tries again.
type driver struct {
	index  int32
	cfg    CoreConfig
	logger *slog.Logger
	// in is the bounded queue; a full queue makes callers wait (backpressure).
	in chan *request
	// quit is closed by stop; exited once the loop has returned.
	quit, exited chan struct{}
	// txPending is the Core's TX_PENDING count as of the last committed round, for
	// metrics read without queueing.
	txPending atomic.Int64

	// Owned by the loop goroutine (and by newDriver before the loop starts).
	log coordlog.Partition
	// core is nil while the partition is unusable (broken holds why).
	core   *Core
	broken error
	// held is a request taken while filling a round that must start the next one.
	held *request
}

// request is one queued call: an Input for the Core, or an inspection or reload that
// runs between rounds.
type request struct {
	in Input
	// ctx and appendMarker are for a Marker: appendMarker appends its control batch
	// durably; nil means the marker is already in the log (CompleteTxn).
	ctx          context.Context
	appendMarker func(context.Context) error
	// inspect runs with every earlier request committed; it reads the Core, never
	// changes it.
	inspect func(*Core)
	// load replaces the log and rebuilds the Core from it.
	load coordlog.Partition
	// reply receives exactly one outcome.
	reply chan outcome
}

type outcome struct {
	step Step
	err  error
}

// newDriver loads the partition; start runs its loop.
func newDriver(cfg CoreConfig, lp coordlog.Partition, logger *slog.Logger) (*driver, error) {
	d := &driver{
		index: lp.Index(), cfg: cfg, logger: logger, log: lp,
		in: make(chan *request, maxRoundInputs), quit: make(chan struct{}), exited: make(chan struct{}),
	}
	if err := d.rebuild(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *driver) start() { go d.run() }

// stop makes the loop return after its current round; queued and later requests answer
// NOT_COORDINATOR. It waits for the loop.
func (d *driver) stop() {
	select {
	case <-d.quit:
	default:
		close(d.quit)
	}
	<-d.exited
}

func (d *driver) closedErr() error {
	return errorf(kerr.NotCoordinator, "share-state store closed")
}

// do queues r and waits for its outcome.
func (d *driver) do(r *request) outcome {
	r.reply = make(chan outcome, 1)
	select {
	case d.in <- r:
	case <-d.quit:
		return outcome{err: d.closedErr()}
	}
	select {
	case o := <-r.reply:
		return o
	case <-d.exited:
		select {
		case o := <-r.reply:
			return o
		default:
			return outcome{err: d.closedErr()}
		}
	}
}

// step runs one input through the Core and returns its Step once committed.
func (d *driver) step(in Input) (Step, error) {
	o := d.do(&request{in: in})
	return o.step, o.err
}

// marker runs a Marker input; appendMarker (nil: already in the log) appends its control
// batch in the input's place in the log.
func (d *driver) marker(ctx context.Context, m Marker, appendMarker func(context.Context) error) (Step, error) {
	o := d.do(&request{in: m, ctx: ctx, appendMarker: appendMarker})
	return o.step, o.err
}

// inspect runs fn on the Core once everything queued before it is committed; it reports
// whether the partition was usable.
func (d *driver) inspect(fn func(*Core)) bool {
	return d.do(&request{inspect: fn}).err == nil
}

func (d *driver) run() {
	defer close(d.exited)
	for {
		r := d.held
		d.held = nil
		if r == nil {
			select {
			case r = <-d.in:
			case <-d.quit:
			}
		}
		select {
		case <-d.quit:
			r = d.refuseQueued(r)
		default:
		}
		if r == nil {
			return
		}
		d.round(r)
		if len(d.in) == 0 && d.held == nil && d.core != nil {
			d.core.Tidy() // idle: encode what a burst of writes left decoded
		}
	}
}

// refuseQueued answers r and everything queued NOT_COORDINATOR once the driver stops.
func (d *driver) refuseQueued(r *request) *request {
	for {
		if r != nil {
			r.reply <- outcome{err: d.closedErr()}
		}
		select {
		case r = <-d.in:
		default:
			return nil
		}
	}
}

// round serves r and whatever else is waiting, within the round's bounds.
func (d *driver) round(r *request) {
	if r.load != nil {
		d.log = r.load
		r.reply <- outcome{err: d.rebuild()}
		return
	}
	if err := d.usable(); err != nil {
		r.reply <- outcome{err: err}
		return
	}
	if r.inspect != nil {
		r.inspect(d.core)
		r.reply <- outcome{}
		return
	}
	reqs := []*request{r}
	steps := []Step{d.core.Step(r.in)}
	size := appendSize(&steps[0])
	for len(reqs) < maxRoundInputs && size < maxRoundBytes {
		var next *request
		select {
		case next = <-d.in:
		default:
		}
		if next == nil {
			break
		}
		if next.in == nil {
			// Inspections and reloads see only committed state: they start the next
			// round.
			d.held = next
			break
		}
		reqs = append(reqs, next)
		steps = append(steps, d.core.Step(next.in))
		size += appendSize(&steps[len(steps)-1])
	}
	d.commit(reqs, steps)
}

func appendSize(st *Step) int {
	n := 0
	for _, b := range st.Append {
		for _, r := range b.Records {
			n += len(r.Key) + len(r.Value)
		}
	}
	return n
}

// commit appends the round's batches in step order, as few writes as the markers allow
// (a marker is a control batch of its own, so the records before it are written first),
// and releases the replies. Writes are cut at step boundaries only, so a failed write is
// charged to the steps it held: those with records in it (or the marker) get its error,
// with an unknown outcome; the steps after it fail as unavailable, for they were stepped
// on memory the log may not hold; the steps before it are committed and answered.
func (d *driver) commit(reqs []*request, steps []Step) {
	var (
		batch          = coordlog.Batch{ProducerID: -1}
		first          = 0 // the first step whose records are not yet written
		failLo, failHi = -1, -1
		failErr        error
	)
	// flush writes the records of steps [first, upTo).
	flush := func(upTo int) bool {
		if len(batch.Records) > 0 {
			base, err := d.log.Append(context.Background(), batch)
			if err != nil {
				failLo, failHi, failErr = first, upTo, d.appendErr(err)
				return false
			}
			d.core.Step(Committed{BaseOffset: base, Records: len(batch.Records)})
			batch.Records = nil
		}
		first = upTo
		return true
	}
	ok := true
	for i := range steps {
		st := &steps[i]
		for _, b := range st.Append {
			batch.Records = append(batch.Records, b.Records...)
		}
		if st.Marker == nil {
			continue
		}
		if ok = flush(i + 1); !ok {
			break
		}
		if fn := reqs[i].appendMarker; fn != nil {
			if err := fn(reqs[i].ctx); err != nil {
				// The transaction coordinator retries the marker: it gets the error as
				// is, and the marker resolved nothing (the Core is rebuilt).
				failLo, failHi, failErr, ok = i, i+1, err, false
				break
			}
		}
	}
	if ok && flush(len(steps)) {
		d.txPending.Store(d.core.TxPendingRecords())
		for i, r := range reqs {
			r.reply <- outcome{step: steps[i]}
		}
		return
	}
	for i, r := range reqs {
		switch {
		case i < failLo:
			r.reply <- outcome{step: steps[i]}
		case i < failHi && (len(steps[i].Append) > 0 || steps[i].Marker != nil):
			r.reply <- outcome{err: failErr}
		default:
			r.reply <- outcome{err: errorf(kerr.CoordinatorNotAvailable, "__share_group_state-%d: an earlier write of the round failed: %v", d.index, failErr)}
		}
	}
	d.reload(failErr)
}

// appendErr is the error of a failed plain append. Any failure other than a closed
// partition may have left the records in the log.
func (d *driver) appendErr(err error) error {
	if errors.Is(err, coordlog.ErrClosed) {
		return errorf(kerr.NotCoordinator, "__share_group_state-%d: %v", d.index, err)
	}
	return fmt.Errorf("%w (%w): append to __share_group_state-%d: %v", kerr.CoordinatorNotAvailable, ErrOutcomeUnknown, d.index, err)
}

// reload rebuilds the Core after a failed append; a failed replay leaves the partition
// unusable until a later request replays it.
func (d *driver) reload(cause error) {
	if err := d.rebuild(); err != nil {
		d.logger.Warn("share-state partition unusable after a failed append", "partition", d.index, "cause", cause, "err", err)
		return
	}
	d.logger.Warn("share-state partition reloaded after a failed append", "partition", d.index, "cause", cause)
}

// usable rebuilds an unusable partition before serving it.
func (d *driver) usable() error {
	if d.core != nil {
		return nil
	}
	cause := d.broken
	if err := d.rebuild(); err != nil {
		return errorf(kerr.CoordinatorNotAvailable, "__share_group_state-%d needs reloading after %v: %v", d.index, cause, err)
	}
	d.logger.Warn("share-state partition reloaded", "partition", d.index, "cause", cause)
	return nil
}

// rebuild replays the log into a new Core.
func (d *driver) rebuild() error {
	d.core = nil
	c := NewCore(d.cfg)
	err := d.log.Replay(func(st coordlog.Stored) error {
		if st.Transactional && st.Marker == nil {
			// exactq never writes share state transactionally (package doc); a
			// transactional batch here was written by something else. Its records are
			// applied like plain ones; say so.
			d.logger.Warn("transactional data batch in __share_group_state", "partition", d.index, "offset", st.BaseOffset, "producer", st.ProducerID)
		}
		return c.Step(Replayed{Stored: st}).Reply.(Done).Err
	})
	if err != nil {
		d.broken = err
		return fmt.Errorf("sharestate: load __share_group_state-%d: %w", d.index, err)
	}
	c.Tidy()
	d.core, d.broken = c, nil
	d.txPending.Store(c.TxPendingRecords())
	return nil
}
