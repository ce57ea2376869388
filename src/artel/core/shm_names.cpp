#include "artel/core/shm_names.h"

#include <dirent.h>
#include <sys/mman.h>

#include <cstring>
#include <memory>

namespace artel {

std::string shm_job_name(const std::string& job_id) { return "/artel-" + job_id; }

int remove_job_shm(const std::string& job_id) {
  const std::string base = shm_job_name(job_id).substr(1);  // the file name under /dev/shm
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/dev/shm"), closedir);
  if (!dir) return 0;
  int removed = 0;
  while (const dirent* e = readdir(dir.get())) {
    const char* name = e->d_name;
    // The job's own name, or one split from it: base + ".<id>". Another job's
    // id never matches, even one that begins with this id.
    if (std::strncmp(name, base.c_str(), base.size()) != 0) continue;
    if (name[base.size()] != '\0' && name[base.size()] != '.') continue;
    std::string path = "/";
    path += name;
    if (shm_unlink(path.c_str()) == 0) ++removed;
  }
  return removed;
}

}  // namespace artel
