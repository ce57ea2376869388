#include "artel/comm/backends.h"

#include "artel/comm/segment_transport.h"
#include "artel/core/shm_names.h"

namespace artel::comm {
namespace {

SegmentConfig segment_config(const GroupOptions& opts) {
  check_job_id(opts.job_id);
  SegmentConfig cfg;
  cfg.rank = opts.rank;
  cfg.world = opts.world_size;
  cfg.host_ranks = opts.world_size;
  cfg.half_bytes = opts.staging_bytes;
  cfg.channel_bytes = opts.message_bytes;
  cfg.arena_bytes = opts.registered_bytes;
  cfg.timeout = opts.timeout;
  return cfg;
}

}  // namespace

void check_job_id(const std::string& id) {
  bool ok = !id.empty() && id.size() <= 100;
  for (char ch : id) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-');
  if (!ok)
    throw Error("invalid job id '" + id + "': need 1-100 characters of A-Z a-z 0-9 . _ -",
                "set GroupOptions::job_id (ARTEL_JOB_ID; `artel launch` sets it)");
}

std::unique_ptr<Transport> make_shm_transport(const GroupOptions& opts) {
  SegmentConfig cfg = segment_config(opts);
  cfg.store = posix_segment_store();
  cfg.name = shm_job_name(opts.job_id);
  return SegmentTransport::connect(cfg);
}

std::unique_ptr<Transport> make_thread_transport(const GroupOptions& opts) {
  SegmentConfig cfg = segment_config(opts);
  cfg.store = thread_segment_store();
  cfg.name = "thread:" + opts.job_id;
  return SegmentTransport::connect(cfg);
}

}  // namespace artel::comm
