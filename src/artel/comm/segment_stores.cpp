// The two SegmentStores: POSIX shared memory (/dev/shm) and an in-process
// table for ranks that are threads.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "artel/comm/process_group.h"
#include "artel/comm/segment_store.h"
#include "artel/core/memory_limit.h"

namespace artel::comm {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

// Maps the segment; the fd stays open for back() and is closed with the
// mapping. Null (errno set, fd open) when it cannot be mapped.
std::shared_ptr<Segment> map_fd(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  auto seg = std::make_shared<Segment>();
  seg->base = static_cast<std::byte*>(p);
  seg->bytes = bytes;
  seg->fd = fd;
  seg->name = name;
  seg->release = [p, bytes, fd] {
    munmap(p, bytes);
    close(fd);
  };
  return seg;
}

// Backs [offset, offset + len) of the file `fd`: charged to this process's
// memory cgroup, so checked against --memory-per-worker first; a full
// /dev/shm is an error here, not a SIGBUS later.
void back_range(int fd, size_t offset, size_t len, const std::string& name) {
  check_memory_limit(len, "a shared-memory segment for communication");
  if (int err = posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(len)); err != 0) {
    const std::string what = "cannot back " + std::to_string(len >> 20) + " MiB of shared-memory segment " + name +
                             ": " + errno_text(err);
    const std::string hint =
        "free space in /dev/shm (df -h /dev/shm; in a container, a larger --shm-size) or lower "
        "GroupOptions::registered_bytes / staging_bytes";
    if (err == ENOSPC) throw SharedMemoryFull(what, hint);
    throw Error(what, hint);
  }
}

// Backed by this process, so charged to its memory cgroup (--memory-per-worker)
// though not yet resident: counted until the segment is unmapped.
void note_backed(Segment& seg, size_t len) {
  note_backed_shared_memory(static_cast<int64_t>(len));
  seg.release = [unmap = std::move(seg.release), len] {
    unmap();
    note_backed_shared_memory(-static_cast<int64_t>(len));
  };
}

class PosixStore : public SegmentStore {
 public:
  std::shared_ptr<Segment> create(const std::string& name, size_t bytes, size_t backed) override {
    int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno == EEXIST)
      throw Error("shared-memory segment " + name + " already exists: another job uses this job id",
                  "give each job its own id; if no job is running, remove /dev/shm" + name);
    if (fd < 0) throw Error("cannot create shared-memory segment " + name + ": " + errno_text(errno));
    try {
      if (ftruncate(fd, static_cast<off_t>(bytes)) != 0)
        throw Error("cannot size shared-memory segment " + name + ": " + errno_text(errno));
      if (backed > 0) back_range(fd, 0, backed, name);
    } catch (...) {
      close(fd);
      shm_unlink(name.c_str());
      throw;
    }
    std::shared_ptr<Segment> seg = map_fd(fd, bytes, name);
    if (!seg) {
      const int err = errno;
      close(fd);
      shm_unlink(name.c_str());
      throw Error("cannot create shared-memory segment " + name + " of " + std::to_string(bytes >> 20) +
                      " MiB: cannot map it: " + errno_text(err),
                  "lower GroupOptions::registered_bytes / staging_bytes");
    }
    if (backed > 0) note_backed(*seg, backed);
    return seg;
  }

  void back(Segment& seg, size_t offset, size_t len) override {
    if (len == 0) return;
    back_range(seg.fd, offset, len, seg.name);
    note_backed(seg, len);
  }

  std::shared_ptr<Segment> open(const std::string& name, Clock::time_point deadline, const std::string& who) override {
    for (;;) {
      int fd = shm_open(name.c_str(), O_RDWR, 0600);
      if (fd >= 0) {
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_size > 0) {
          if (std::shared_ptr<Segment> seg = map_fd(fd, static_cast<size_t>(st.st_size), name)) return seg;
          const int err = errno;
          close(fd);
          throw Error("cannot map shared-memory segment " + name + ": " + errno_text(err));
        }
        close(fd);  // being created: not sized yet
      } else if (errno != ENOENT) {
        throw Error("cannot open shared-memory segment " + name + ": " + errno_text(errno));
      }
      if (Clock::now() >= deadline)
        throw TimeoutError("shared-memory segment " + name + " did not appear before the timeout: " + who +
                               " had not created it",
                           "start every worker of the job with the same job id and check the other workers' "
                           "output; a timeout shorter than the workers' start-up ends here too (--timeout)");
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  }

  void remove(const std::string& name) override { shm_unlink(name.c_str()); }
};

// Segments of ranks that are threads of this process, by name.
class ThreadStore : public SegmentStore {
 public:
  std::shared_ptr<Segment> create(const std::string& name, size_t bytes, size_t /*backed: all of it*/) override {
    std::lock_guard lock(mu_);
    if (table_.count(name)) throw Error("in-process group " + name + " already exists", "give each job its own id");
    // Zero pages on demand, like /dev/shm's: the arenas are address space
    // until used (Note [Registered memory is address space first]).
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      throw Error("cannot create in-process group " + name + " of " + std::to_string(bytes >> 20) +
                      " MiB: " + errno_text(errno),
                  "lower GroupOptions::registered_bytes / staging_bytes");
    auto seg = std::make_shared<Segment>();
    seg->base = static_cast<std::byte*>(p);
    seg->bytes = bytes;
    seg->release = [p, bytes] { munmap(p, bytes); };
    table_[name] = seg;
    cv_.notify_all();
    return seg;
  }

  void back(Segment&, size_t, size_t) override {}  // ordinary memory, backed as it is touched

  std::shared_ptr<Segment> open(const std::string& name, Clock::time_point deadline, const std::string& who) override {
    std::unique_lock lock(mu_);
    if (!cv_.wait_until(lock, deadline, [&] { return table_.count(name) > 0; }))
      throw TimeoutError("in-process group " + name + " did not appear before the timeout: " + who +
                             " had not created it",
                         "every rank of the job must call init_process_group");
    return table_[name];
  }

  void remove(const std::string& name) override {
    std::lock_guard lock(mu_);
    table_.erase(name);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Segment>> table_;
};

}  // namespace

std::shared_ptr<SegmentStore> posix_segment_store() {
  static auto store = std::make_shared<PosixStore>();
  return store;
}

std::shared_ptr<SegmentStore> thread_segment_store() {
  static auto store = std::make_shared<ThreadStore>();
  return store;
}

int remove_job_segments(const std::string& job_id) {
  const std::string prefix = "artel-" + job_id;
  int removed = 0;
  DIR* dir = opendir("/dev/shm");
  if (!dir) return 0;
  while (dirent* e = readdir(dir)) {
    std::string n = e->d_name;
    if (n == prefix || n.rfind(prefix + ".", 0) == 0) removed += shm_unlink(("/" + n).c_str()) == 0;
  }
  closedir(dir);
  return removed;
}

}  // namespace artel::comm
