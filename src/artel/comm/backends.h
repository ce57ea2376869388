// The built-in backends' transports (process_group.cpp registers them).
#pragma once

#include <memory>

#include "artel/comm/process_group.h"
#include "artel/comm/transport.h"

namespace artel::comm {

// "shm": processes on one host sharing a POSIX segment named after the job id.
std::unique_ptr<Transport> make_shm_transport(const GroupOptions& opts);
// "thread": ranks are threads of this process (tests; thread_group.h).
std::unique_ptr<Transport> make_thread_transport(const GroupOptions& opts);

// Checks a job id is usable in a segment name: 1-100 of [A-Za-z0-9._-].
void check_job_id(const std::string& job_id);

}  // namespace artel::comm
