// A SQLite VFS that writes each transaction's WAL frames with one pwrite
// instead of two per page.
//
// SQLite appends a commit to the write-ahead log frame by frame: a 24-byte
// frame header, then the page, each its own write() (wal.c,
// walWriteOneFrame). A task's submit and placement dirty about fifty pages
// (a task row touches nine indices), so a commit was about a hundred
// syscalls; on the 2-core VM of docs/benchmarks.md they were an eighth of
// the write path's CPU. This VFS wraps the default one and, for WAL files
// only, gathers contiguous appends in memory and writes them at once (in
// 64 KiB pieces: the unix VFS writes less than 128 KiB a call):
//
//   - when the page after a commit frame's header has been gathered (the
//     header's "database size after commit" field is non-zero only there):
//     the commit reaches the file before SQLite's write call returns, as
//     without this VFS, so a process crash after COMMIT loses nothing;
//   - before anything else touches that file or its shared-memory index
//     (read, sync, truncate, size, file control, shm lock/barrier, close),
//     and before a write that does not continue the gathered run;
//   - past kMaxBatchBytes (a large transaction that spills its cache).
//
// A failed write is reported by the call that flushed, which for a commit
// is the write of its last page: SQLite then fails the COMMIT, as it would
// have. Readers (other connections) see frames only once the writer has
// updated the WAL index after the last frame, so never gathered bytes.
// Every other file (the database, temp files) goes straight through.
#pragma once

namespace cp::sqlite {

// The VFS name to pass to sqlite3_open_v2 (registered on first call,
// thread-safe; not made the default).
const char* wal_batching_vfs();

// Writes that SQLite made to WAL files through this VFS, and how many
// writes to the files they became (for the tests and the benchmark).
struct WalBatchingStats {
  long long writes = 0;
  long long flushes = 0;
};
WalBatchingStats wal_batching_stats();

}  // namespace cp::sqlite
