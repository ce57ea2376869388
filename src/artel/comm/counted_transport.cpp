#include "artel/comm/counted_transport.h"

namespace artel::comm {

// Counted once the call returns: a message that failed half-way was not carried.
void CountedTransport::send(int dst, Tag tag, const void* data, size_t nbytes, const OpContext& ctx) {
  inner_->send(dst, tag, data, nbytes, ctx);
  count(sent_, nbytes);
}

void CountedTransport::recv(int src, Tag tag, void* data, size_t nbytes, const OpContext& ctx) {
  inner_->recv(src, tag, data, nbytes, ctx);
  count(received_, nbytes);
}

void CountedTransport::send_recv(int dst, Tag send_tag, const void* send_data, size_t send_bytes, int src,
                                 Tag recv_tag, void* recv_data, size_t recv_bytes, const OpContext& ctx) {
  inner_->send_recv(dst, send_tag, send_data, send_bytes, src, recv_tag, recv_data, recv_bytes, ctx);
  count(sent_, send_bytes);
  count(received_, recv_bytes);
}

bool CountedTransport::try_send(int dst, Tag tag, const void* data, size_t nbytes, const OpContext& ctx) {
  if (!inner_->try_send(dst, tag, data, nbytes, ctx)) return false;
  count(sent_, nbytes);
  return true;
}

}  // namespace artel::comm
