#include "store/sqlite/wal_checkpointer.h"

namespace cp::sqlite {

Result<std::unique_ptr<WalCheckpointer>> WalCheckpointer::start(const Options& options, Connection& writer) {
  CP_ASSIGN(auto own, Connection::open(options.path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX));
  // A checkpoint syncs the log before copying it and the database after,
  // under NORMAL as under FULL; the store's setting, for consistency.
  CP_TRY(own->execute(options.synchronous_full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL"));
  auto self = std::unique_ptr<WalCheckpointer>(new WalCheckpointer(options, writer, std::move(own)));
  // Replaces SQLite's own automatic checkpoint (which is a WAL hook too).
  sqlite3_wal_hook(writer.handle(), &WalCheckpointer::on_commit, self.get());
  return self;
}

WalCheckpointer::WalCheckpointer(Options options, Connection& writer, std::unique_ptr<Connection> own)
    : options_(std::move(options)), writer_(writer), own_(std::move(own)), thread_([this] { run(); }) {}

WalCheckpointer::~WalCheckpointer() {
  sqlite3_wal_hook(writer_.handle(), nullptr, nullptr);
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

WalCheckpointer::Stats WalCheckpointer::stats() const {
  std::lock_guard lock(mu_);
  Stats out = stats_;
  out.pending = due_ || running_;
  return out;
}

int WalCheckpointer::on_commit(void* self_ptr, sqlite3* db, const char* name, int pages) {
  auto* self = static_cast<WalCheckpointer*>(self_ptr);
  if (pages >= self->options_.backstop_pages) {
    // What SQLite's automatic checkpoint does, in this same place.
    int rc = sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    std::lock_guard lock(self->mu_);
    if (rc == SQLITE_OK) {
      ++self->stats_.by_writer;
    } else if (rc != SQLITE_BUSY) {  // busy: the thread is checkpointing right now, as good
      ++self->stats_.failed;
    }
  } else if (pages >= self->options_.pages) {
    std::lock_guard lock(self->mu_);
    // A log that did not restart after the last checkpoint (a reader still
    // used its frames) wakes the thread again only once a quarter of
    // `pages` has been added since: not at every commit, each with a sync.
    if (pages < self->backfilled_) self->backfilled_ = 0;  // it restarted and grew again
    if (!self->due_ && !self->running_ && pages - self->backfilled_ >= self->options_.pages / 4) {
      self->due_ = true;
      self->cv_.notify_one();
    }
  } else {
    std::lock_guard lock(self->mu_);
    self->backfilled_ = 0;
  }
  return SQLITE_OK;
}

void WalCheckpointer::run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || due_; });
    if (stop_) return;
    due_ = false;
    running_ = true;
    lock.unlock();
    // PASSIVE: copies what no reader still needs, waits for nobody, and
    // lets the writer go on meanwhile. The next commit past `pages` wakes
    // this thread again if the log did not restart.
    int log = 0, backfilled = 0;
    int rc = sqlite3_wal_checkpoint_v2(own_->handle(), "main", SQLITE_CHECKPOINT_PASSIVE, &log, &backfilled);
    lock.lock();
    running_ = false;
    if (rc == SQLITE_OK) {
      backfilled_ = backfilled;
      ++stats_.background;
    } else if (rc != SQLITE_BUSY) {  // busy: the writer ran its own checkpoint meanwhile
      ++stats_.failed;
    }
  }
}

}  // namespace cp::sqlite
