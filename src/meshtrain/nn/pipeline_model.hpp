#pragma once
// What a pipeline executor (parallel/pipeline/executor.hpp) drives: a model
// holding some pieces of the whole (one per virtual stage this rank runs),
// each running micro-batches in activation slots. A slot holds one
// micro-batch's activations from its forward until its backward (until
// backward_piece_weights when the backward is split); the executor picks
// slot numbers and reuses a slot once it is free. Slots are made on first
// use, so the activation memory is the schedule's peak in flight.
//
// Buffers returned here are owned by the slot: the executor receives into
// them and sends from them. A forward's output stays valid until the slot's
// next forward, a backward's input gradient until its next backward, so a
// slot can take its next micro-batch's input while the last one's input
// gradient is still being sent.
// Activations and their gradients are (B, T, C) floats, activation_floats().
#include <cstddef>
#include <cstdint>

#include "meshtrain/core/batch.hpp"
#include "meshtrain/nn/model.hpp"

namespace meshtrain::nn {

class PipelineModel {
 public:
  virtual ~PipelineModel() = default;
  virtual size_t pieces() const = 0;
  // The first virtual stage reads the tokens; the last has the loss.
  virtual bool piece_has_embedding(size_t piece) const = 0;
  virtual bool piece_has_head(size_t piece) const = 0;
  // Floats of one micro-batch's activation (B, T, C) passed between pieces.
  virtual int64_t activation_floats(int64_t B, int64_t T) const = 0;
  // Where the piece's input from the previous stage goes (not for the embedding piece).
  virtual float* input_buffer(size_t piece, size_t slot, int64_t B, int64_t T) = 0;
  // Where the gradient of the piece's output from the next stage goes (not for the head piece).
  virtual float* output_gradient_buffer(size_t piece, size_t slot, int64_t B, int64_t T) = 0;
  // Forward of micro-batch `batch` (which must stay alive until the slot's
  // backward): the embedding piece reads its tokens, the others their
  // input_buffer. Returns the output for the next stage, or for the head
  // piece nullptr with the loss in *loss.
  virtual const float* forward_piece(size_t piece, size_t slot, const Batch& batch, ForwardResult* loss) = 0;
  // Backward of the slot's micro-batch from the output gradient (the head
  // piece: from its loss, as the mean over the micro-batch); gradients add
  // into the store. Returns the input gradient for the previous stage, or
  // nullptr for the embedding piece. split: the weight gradients of the
  // linear layers wait for backward_piece_weights (zero-bubble schedules).
  virtual const float* backward_piece(size_t piece, size_t slot, bool split) = 0;
  virtual void backward_piece_weights(size_t piece, size_t slot) = 0;
  // Slots of `piece` made so far: the most micro-batches it held at once.
  virtual size_t slots_made(size_t piece) const = 0;
};

}  // namespace meshtrain::nn
