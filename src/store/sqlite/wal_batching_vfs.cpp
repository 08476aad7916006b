#include "store/sqlite/wal_batching_vfs.h"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

namespace cp::sqlite {

namespace {

constexpr const char* kName = "cubeplane-wal-batching";
constexpr int kFrameHeaderBytes = 24;            // wal.c: WAL_FRAME_HDRSIZE
constexpr std::size_t kMaxBatchBytes = 4 << 20;  // flushed past this even without a commit
// The unix VFS writes at most 128 KiB - 1 bytes a call (os_unix.c,
// seekAndWrite: cnt &= 0x1ffff), so a flush is cut into pieces of this.
constexpr std::size_t kMaxWriteBytes = 64 << 10;

std::atomic<long long> g_writes{0};
std::atomic<long long> g_flushes{0};

sqlite3_vfs* parent_vfs(sqlite3_vfs* vfs) { return static_cast<sqlite3_vfs*>(vfs->pAppData); }

// Ours, then the parent's file right after it (szOsFile covers both).
struct BatchFile {
  sqlite3_file base;  // first: SQLite sees a BatchFile as an sqlite3_file
  sqlite3_file* real = nullptr;
  bool wal = false;
  bool commit_page_next = false;  // the last write was a commit frame's header
  sqlite3_int64 start = 0;        // file offset of buf[0]
  std::vector<char> buf;
};

constexpr std::size_t kRealOffset = (sizeof(BatchFile) + 15) & ~std::size_t{15};

BatchFile* of(sqlite3_file* f) { return reinterpret_cast<BatchFile*>(f); }
const sqlite3_io_methods* real_io(BatchFile* f) { return f->real->pMethods; }

int flush(BatchFile* f) {
  if (f->buf.empty()) return SQLITE_OK;
  int rc = SQLITE_OK;
  for (std::size_t done = 0; done < f->buf.size() && rc == SQLITE_OK; done += kMaxWriteBytes) {
    const std::size_t n = std::min(kMaxWriteBytes, f->buf.size() - done);
    rc = real_io(f)->xWrite(f->real, f->buf.data() + done, static_cast<int>(n),
                            f->start + static_cast<sqlite3_int64>(done));
    g_flushes.fetch_add(1, std::memory_order_relaxed);
  }
  f->buf.clear();
  f->commit_page_next = false;
  return rc;
}

// Each method that is not a write flushes first, then forwards.
#define CP_FLUSH_OR_RETURN(f)         \
  do {                                \
    const int flushed = flush(f);     \
    if (flushed != SQLITE_OK) return flushed; \
  } while (0)

int x_close(sqlite3_file* file) {
  BatchFile* f = of(file);
  const int flushed = flush(f);
  const int rc = real_io(f)->xClose(f->real);
  f->~BatchFile();
  return flushed != SQLITE_OK ? flushed : rc;
}

int x_read(sqlite3_file* file, void* out, int amount, sqlite3_int64 offset) {
  BatchFile* f = of(file);
  CP_FLUSH_OR_RETURN(f);
  return real_io(f)->xRead(f->real, out, amount, offset);
}

int x_write(sqlite3_file* file, const void* data, int amount, sqlite3_int64 offset) {
  BatchFile* f = of(file);
  if (!f->wal) return real_io(f)->xWrite(f->real, data, amount, offset);
  g_writes.fetch_add(1, std::memory_order_relaxed);
  if (!f->buf.empty() && offset != f->start + static_cast<sqlite3_int64>(f->buf.size())) CP_FLUSH_OR_RETURN(f);
  if (f->buf.empty()) f->start = offset;
  const auto* bytes = static_cast<const char*>(data);
  f->buf.insert(f->buf.end(), bytes, bytes + amount);
  if (f->commit_page_next) return flush(f);  // the commit frame's page: the transaction is whole
  // A frame header whose "database size after commit" (bytes 4..7) is set
  // is the last frame of a transaction; its page comes next.
  if (amount == kFrameHeaderBytes && offset > 0) {
    f->commit_page_next = bytes[4] != 0 || bytes[5] != 0 || bytes[6] != 0 || bytes[7] != 0;
  }
  if (f->buf.size() >= kMaxBatchBytes && !f->commit_page_next) return flush(f);
  return SQLITE_OK;
}

int x_truncate(sqlite3_file* file, sqlite3_int64 size) {
  BatchFile* f = of(file);
  CP_FLUSH_OR_RETURN(f);
  return real_io(f)->xTruncate(f->real, size);
}

int x_sync(sqlite3_file* file, int flags) {
  BatchFile* f = of(file);
  CP_FLUSH_OR_RETURN(f);
  return real_io(f)->xSync(f->real, flags);
}

int x_file_size(sqlite3_file* file, sqlite3_int64* size) {
  BatchFile* f = of(file);
  CP_FLUSH_OR_RETURN(f);
  return real_io(f)->xFileSize(f->real, size);
}

int x_lock(sqlite3_file* file, int level) { return real_io(of(file))->xLock(of(file)->real, level); }
int x_unlock(sqlite3_file* file, int level) { return real_io(of(file))->xUnlock(of(file)->real, level); }
int x_check_reserved_lock(sqlite3_file* file, int* out) {
  return real_io(of(file))->xCheckReservedLock(of(file)->real, out);
}

int x_file_control(sqlite3_file* file, int op, void* arg) {
  BatchFile* f = of(file);
  CP_FLUSH_OR_RETURN(f);
  return real_io(f)->xFileControl(f->real, op, arg);
}

int x_sector_size(sqlite3_file* file) { return real_io(of(file))->xSectorSize(of(file)->real); }
int x_device_characteristics(sqlite3_file* file) {
  return real_io(of(file))->xDeviceCharacteristics(of(file)->real);
}

int x_shm_map(sqlite3_file* file, int page, int page_size, int extend, void volatile** out) {
  return real_io(of(file))->xShmMap(of(file)->real, page, page_size, extend, out);
}
int x_shm_lock(sqlite3_file* file, int offset, int n, int flags) {
  BatchFile* f = of(file);
  CP_FLUSH_OR_RETURN(f);
  return real_io(f)->xShmLock(f->real, offset, n, flags);
}
void x_shm_barrier(sqlite3_file* file) {
  BatchFile* f = of(file);
  (void)flush(f);  // no way to report it here; a failed flush is reported by the next write or sync
  real_io(f)->xShmBarrier(f->real);
}
int x_shm_unmap(sqlite3_file* file, int delete_flag) {
  return real_io(of(file))->xShmUnmap(of(file)->real, delete_flag);
}
int x_fetch(sqlite3_file* file, sqlite3_int64 offset, int amount, void** out) {
  BatchFile* f = of(file);
  CP_FLUSH_OR_RETURN(f);
  return real_io(f)->xFetch(f->real, offset, amount, out);
}
int x_unfetch(sqlite3_file* file, sqlite3_int64 offset, void* p) {
  return real_io(of(file))->xUnfetch(of(file)->real, offset, p);
}

#undef CP_FLUSH_OR_RETURN

// One table per io_methods version, so that we never claim methods the
// parent's file lacks.
std::array<sqlite3_io_methods, 3> make_methods() {
  std::array<sqlite3_io_methods, 3> all{};
  for (int v = 1; v <= 3; ++v) {
    sqlite3_io_methods& m = all[static_cast<std::size_t>(v - 1)];
    m.iVersion = v;
    m.xClose = x_close;
    m.xRead = x_read;
    m.xWrite = x_write;
    m.xTruncate = x_truncate;
    m.xSync = x_sync;
    m.xFileSize = x_file_size;
    m.xLock = x_lock;
    m.xUnlock = x_unlock;
    m.xCheckReservedLock = x_check_reserved_lock;
    m.xFileControl = x_file_control;
    m.xSectorSize = x_sector_size;
    m.xDeviceCharacteristics = x_device_characteristics;
    if (v >= 2) {
      m.xShmMap = x_shm_map;
      m.xShmLock = x_shm_lock;
      m.xShmBarrier = x_shm_barrier;
      m.xShmUnmap = x_shm_unmap;
    }
    if (v >= 3) {
      m.xFetch = x_fetch;
      m.xUnfetch = x_unfetch;
    }
  }
  return all;
}

const std::array<sqlite3_io_methods, 3>& methods() {
  static const auto all = make_methods();
  return all;
}

int x_open(sqlite3_vfs* vfs, const char* name, sqlite3_file* file, int flags, int* out_flags) {
  sqlite3_vfs* parent = parent_vfs(vfs);
  auto* f = new (file) BatchFile();
  f->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + kRealOffset);
  f->wal = (flags & SQLITE_OPEN_WAL) != 0;
  std::memset(f->real, 0, static_cast<std::size_t>(parent->szOsFile));
  const int rc = parent->xOpen(parent, name, f->real, flags, out_flags);
  const sqlite3_io_methods* real = f->real->pMethods;
  if (real == nullptr) {
    // Nothing to close: SQLite will not call xClose on a NULL pMethods.
    f->~BatchFile();
    file->pMethods = nullptr;
    return rc;
  }
  const int version = real->iVersion < 1 ? 1 : real->iVersion > 3 ? 3 : real->iVersion;
  file->pMethods = &methods()[static_cast<std::size_t>(version - 1)];
  return rc;
}

// The rest of the VFS is the parent's, called with the parent.
int x_delete(sqlite3_vfs* vfs, const char* name, int sync_dir) {
  return parent_vfs(vfs)->xDelete(parent_vfs(vfs), name, sync_dir);
}
int x_access(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
  return parent_vfs(vfs)->xAccess(parent_vfs(vfs), name, flags, out);
}
int x_full_pathname(sqlite3_vfs* vfs, const char* name, int n, char* out) {
  return parent_vfs(vfs)->xFullPathname(parent_vfs(vfs), name, n, out);
}
void* x_dl_open(sqlite3_vfs* vfs, const char* name) { return parent_vfs(vfs)->xDlOpen(parent_vfs(vfs), name); }
void x_dl_error(sqlite3_vfs* vfs, int n, char* out) { parent_vfs(vfs)->xDlError(parent_vfs(vfs), n, out); }
void (*x_dl_sym(sqlite3_vfs* vfs, void* handle, const char* symbol))(void) {
  return parent_vfs(vfs)->xDlSym(parent_vfs(vfs), handle, symbol);
}
void x_dl_close(sqlite3_vfs* vfs, void* handle) { parent_vfs(vfs)->xDlClose(parent_vfs(vfs), handle); }
int x_randomness(sqlite3_vfs* vfs, int n, char* out) {
  return parent_vfs(vfs)->xRandomness(parent_vfs(vfs), n, out);
}
int x_sleep(sqlite3_vfs* vfs, int us) { return parent_vfs(vfs)->xSleep(parent_vfs(vfs), us); }
int x_current_time(sqlite3_vfs* vfs, double* out) { return parent_vfs(vfs)->xCurrentTime(parent_vfs(vfs), out); }
int x_get_last_error(sqlite3_vfs* vfs, int n, char* out) {
  return parent_vfs(vfs)->xGetLastError ? parent_vfs(vfs)->xGetLastError(parent_vfs(vfs), n, out) : 0;
}
int x_current_time_int64(sqlite3_vfs* vfs, sqlite3_int64* out) {
  return parent_vfs(vfs)->xCurrentTimeInt64(parent_vfs(vfs), out);
}

}  // namespace

const char* wal_batching_vfs() {
  static std::once_flag once;
  static sqlite3_vfs vfs{};
  std::call_once(once, [] {
    sqlite3_vfs* parent = sqlite3_vfs_find(nullptr);
    vfs.iVersion = 2;  // up to xCurrentTimeInt64; the system-call hooks stay the parent's business
    vfs.szOsFile = static_cast<int>(kRealOffset) + parent->szOsFile;
    vfs.mxPathname = parent->mxPathname;
    vfs.zName = kName;
    vfs.pAppData = parent;
    vfs.xOpen = x_open;
    vfs.xDelete = x_delete;
    vfs.xAccess = x_access;
    vfs.xFullPathname = x_full_pathname;
    vfs.xDlOpen = x_dl_open;
    vfs.xDlError = x_dl_error;
    vfs.xDlSym = x_dl_sym;
    vfs.xDlClose = x_dl_close;
    vfs.xRandomness = x_randomness;
    vfs.xSleep = x_sleep;
    vfs.xCurrentTime = x_current_time;
    vfs.xGetLastError = x_get_last_error;
    vfs.xCurrentTimeInt64 = parent->iVersion >= 2 && parent->xCurrentTimeInt64 ? x_current_time_int64 : nullptr;
    sqlite3_vfs_register(&vfs, /*makeDflt=*/0);
  });
  return kName;
}

WalBatchingStats wal_batching_stats() {
  return {g_writes.load(std::memory_order_relaxed), g_flushes.load(std::memory_order_relaxed)};
}

}  // namespace cp::sqlite
