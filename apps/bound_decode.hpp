#pragma once
// `ioattn bound --decode`: the time bound of one decode step (ioattn/decode.hpp) on a machine.

#include "machine.hpp"

#include <ioattn/problem.hpp>

namespace ioattn::app {

/// Prints (text or JSON) the decode step of `p` read as decode: batch sequences of n_k cached
/// rows each, n_q new tokens, heads over kv_heads: the lower bound L (every visible cached
/// word once, Q, O and L), the schedule's exact I/O (io_cost_decode), the flops F, and
/// max(w L / beta, F / P). Throws InvalidArgument for a shape decode() rejects.
void print_decode_bound(const Problem& p, const Machine& machine, bool json);

} // namespace ioattn::app
