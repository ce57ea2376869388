// The POSIX shared-memory names of a job: comm's shm backend creates its
// segments under them, and the launcher removes what a job's workers left
// behind when they die. A segment's name is unlinked as soon as every rank
// has mapped it, so a finished job leaves nothing; but a worker killed while
// a group is still forming (SIGKILL, or the launcher stopping the survivors
// of a failed job) cannot, and each such segment would hold its memory in
// /dev/shm until the machine restarts.
//
//   shm_job_name("123-0-5eed")            // "/artel-123-0-5eed"; groups split from it append ".<id>"
//   remove_job_shm("123-0-5eed")          // unlinks /dev/shm/artel-123-0-5eed and artel-123-0-5eed.*
#pragma once

#include <string>

namespace artel {

std::string shm_job_name(const std::string& job_id);

// Unlinks every shared-memory segment of the job; returns how many. Call it
// only once no worker of the job can still open one.
int remove_job_shm(const std::string& job_id);

}  // namespace artel
