package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// schema is the program's database: the rows it writes (one per input) and, in the same
// database, the snapshot of the broker transaction that acknowledged them. The inputs
// table has no unique key on purpose: exactly-once comes from the protocol, and a
// duplicate would show.
const schema = `
CREATE TABLE IF NOT EXISTS inputs (
	topic          TEXT    NOT NULL,
	part           INTEGER NOT NULL,
	offs           INTEGER NOT NULL,
	k              BLOB,
	v              BLOB,
	delivery_count INTEGER NOT NULL,
	checkpoint     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS eos_checkpoint (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	checkpoint INTEGER NOT NULL,
	snapshot   BLOB    NOT NULL
);
`

// db is the SQLite database: a checkpoint is one SQL transaction that inserts its rows and
// replaces the stored snapshot.
type db struct {
	sql *sql.DB
}

// openDB opens (creating if needed) the database at path. The journal is a WAL synced at
// every commit: a committed SQL transaction survives a crash of the process and of the
// machine, an uncommitted one is rolled back when the database is opened again.
func openDB(ctx context.Context, path string) (*db, error) {
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(10000)"} {
		q.Add("_pragma", p)
	}
	s, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	s.SetMaxOpenConns(1) // one writer; SQLite serializes them anyway
	if _, err := s.ExecContext(ctx, schema); err != nil {
		s.Close()
		return nil, fmt.Errorf("create schema in %s: %w", path, err)
	}
	return &db{sql: s}, nil
}

func (d *db) close() error { return d.sql.Close() }

// lastCheckpoint returns the last committed checkpoint's number and eos snapshot (0 and nil
// before the first).
func (d *db) lastCheckpoint(ctx context.Context) (int64, []byte, error) {
	var n int64
	var snap []byte
	err := d.sql.QueryRowContext(ctx, `SELECT checkpoint, snapshot FROM eos_checkpoint WHERE id = 1`).Scan(&n, &snap)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, nil
	}
	return n, snap, err
}

// row is one input as stored.
type row struct {
	topic         string
	partition     int32
	offset        int64
	key, value    []byte
	deliveryCount int16
}

// checkpointTx is a checkpoint's SQL transaction in progress.
type checkpointTx struct {
	tx *sql.Tx
}

// begin starts checkpoint n's SQL transaction and writes its rows and the snapshot; the
// checkpoint is complete when commit returns.
func (d *db) begin(ctx context.Context, n int64, rows []row, snapshot []byte) (*checkpointTx, error) {
	tx, err := d.sql.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO inputs (topic, part, offs, k, v, delivery_count, checkpoint) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	if err == nil {
		for _, r := range rows {
			if _, err = ins.ExecContext(ctx, r.topic, r.partition, r.offset, r.key, r.value, r.deliveryCount, n); err != nil {
				break
			}
		}
		ins.Close()
	}
	if err == nil {
		_, err = tx.ExecContext(ctx, `INSERT INTO eos_checkpoint (id, checkpoint, snapshot) VALUES (1, ?, ?)
			ON CONFLICT (id) DO UPDATE SET checkpoint = excluded.checkpoint, snapshot = excluded.snapshot`, n, snapshot)
	}
	if err != nil {
		return nil, errors.Join(err, tx.Rollback())
	}
	return &checkpointTx{tx: tx}, nil
}

func (c *checkpointTx) commit() error   { return c.tx.Commit() }
func (c *checkpointTx) rollback() error { return c.tx.Rollback() }
