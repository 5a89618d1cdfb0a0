#pragma once
// Recurrent layers: LSTM, GRU and RNN (forward, reverse, bidirectional;
// activations and their alpha/beta; clip; sequence_lens; initial states;
// layout 0 [seq, batch, ...] and 1 [batch, seq, ...]; every output).

#include "runtime/op_registry.h"

namespace qs::ops {

void lstm(KernelContext& ctx);
void gru(KernelContext& ctx);
void rnn(KernelContext& ctx);

} // namespace qs::ops
