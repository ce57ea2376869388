// Registers the "mpi" backend when this library is linked (whole-archive: the
// top CMakeLists.txt's ARTEL_MPI_LINK), so `--backend mpi` and
// GroupOptions{.backend = "mpi"} find it.
#include "artel/comm/mpi/mpi_transport.h"

namespace artel::comm::mpi {
namespace {

const bool kRegistered = register_backend("mpi", [](const GroupOptions& opts) -> std::unique_ptr<Transport> {
  return MpiTransport::world(opts);
});

}  // namespace
}  // namespace artel::comm::mpi
