package txn

// Outcome is what the coordinator knows of the transaction a producer id wrote in at one
// epoch. The share-state store asks it after a restart about acknowledgements staged
// (TX_PENDING) by transactions whose marker never reached it.
type Outcome struct {
	// Decided is true when that transaction is over and no marker of it is still to be
	// written: Commit says how it ended, and MarkerEpoch is the epoch its markers carried.
	Decided     bool
	Commit      bool
	MarkerEpoch int16
	// Open is true when the transaction is still running, or decided with its markers
	// still being written: its marker will come.
	Open bool
	// When neither is set the coordinator cannot tell: the producer id is unknown here
	// (its transactional id expired), or the producer has moved on to later transactions,
	// or it uses transaction version 1, where every transaction of an epoch shares it.
}

// TransactionOutcome reports what became of the transaction producer id pid ran at epoch
// epoch. It answers from the coordinator's durable state, which keeps only each
// transactional id's latest transaction, so it can tell only about that one:
//
//   - a kept (KIP-939 prepared) transaction of pid, a pending transition or markers
//     being written, or an Ongoing or Prepare* transaction of pid at that epoch: Open;
//   - CompleteCommit or CompleteAbort at transaction version 2, where the end bumped the
//     epoch once, so the transaction ran at the completed epoch minus one: Decided when
//     epoch is that one;
//   - anything else: neither.
func (c *Coordinator) TransactionOutcome(pid int64, epoch int16) Outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.core.entries {
		m := &e.meta
		if m.Kept && m.KeptProducerID == pid {
			return Outcome{Open: true}
		}
		if m.ProducerID != pid {
			continue
		}
		ran := m.ProducerEpoch // the epoch the latest transaction ran at
		if m.State != Ongoing && m.State != Empty && m.ClientTV >= 2 {
			ran-- // decided: the end bumped the epoch (TV2)
		}
		switch {
		case e.pending != noState || e.markers != nil:
			return Outcome{Open: epoch >= ran}
		case m.State == Ongoing || m.State == PrepareCommit || m.State == PrepareAbort || m.State == PrepareEpochFence:
			return Outcome{Open: epoch == ran}
		case (m.State == CompleteCommit || m.State == CompleteAbort) && m.ClientTV >= 2 && epoch == ran:
			return Outcome{Decided: true, Commit: m.State == CompleteCommit, MarkerEpoch: m.ProducerEpoch}
		}
		return Outcome{}
	}
	return Outcome{}
}

// CoordinatorEpoch is the coordinator epoch its markers carry.
func (c *Coordinator) CoordinatorEpoch() int32 { return c.cfg.CoordinatorEpoch }
