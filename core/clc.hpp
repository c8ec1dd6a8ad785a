// Cluster launch control (CLC, sm_100 only; PTX "clusterlaunchcontrol.try_cancel"
// and "clusterlaunchcontrol.query_cancel"): the 16-byte response a
// try_cancel writes into shared memory, and the CTA id query_cancel decodes
// from a successful one.
//
// A running cluster asks the hardware to cancel the launch of a cluster
// that has not started yet; on success it takes over that cluster's work
// (the response names the canceled cluster's first CTA). The request is
// asynchronous: its completion writes the response and performs
// complete_tx(16) on an mbarrier, and the response may be read only after
// a wait on that barrier observed the phase. The response is opaque: decode
// it with the backend's clc_is_canceled / clc_first_ctaid only.
#pragma once

#include <cstdint>

#include "config.hpp"

namespace wspipe {

// The try_cancel response: 16 bytes, naturally aligned, in shared memory
// (PTX: "the naturally aligned address of the 16-byte wide shared memory
// location"). Its contents are opaque.
struct alignas(16) ClcResponse {
  std::uint32_t word[4];
};
static_assert(sizeof(ClcResponse) == 16 && alignof(ClcResponse) == 16);

// query_cancel.get_first_ctaid: the id of the first CTA of the canceled
// cluster (PTX: "x, y and z coordinates"; the fourth element is unspecified).
struct ClcCtaId {
  std::uint32_t x = 0, y = 0, z = 0;
};

}  // namespace wspipe
