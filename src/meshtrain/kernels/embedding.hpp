#pragma once
// Input-side kernels: token + position embedding (GPT encoder), a learned
// position added to patch embeddings (ViT), image patch extraction and mean
// pooling over the sequence.
//
// Dims: B batch, T sequence (tokens or patches), C channels (n_embd).
// Token ids must already be checked to lie in [0, V): kernels do not throw.
#include <cstdint>

namespace meshtrain::kernels {

// out (B, T, C) = wte[tokens[b, t]] + wpe[t]; wte (V, C), wpe (>= T, C).
void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B,
                     int64_t T, int64_t C);
// dwte (V, C) and dwpe (>= T, C) accumulate (+=) dout (B, T, C). Columns are
// split between threads so repeated tokens never race.
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B,
                      int64_t T, int64_t C);

// A vocabulary shard of the token embedding: wte_rows (V_rows, C) holds rows
// [v0, v0 + V_rows) of wte. out (N, C) = wte_rows[tokens[n] - v0] for tokens
// in the shard and 0 for the others, written (the shards' outputs sum to the
// whole lookup).
void embedding_rows_forward(float* out, const int32_t* tokens, const float* wte_rows, int64_t v0, int64_t V_rows,
                            int64_t N, int64_t C);
// dwte_rows (V_rows, C) += dout (N, C) at the rows of the shard's tokens;
// other tokens are skipped. Columns are split between threads, as above.
void embedding_rows_backward(float* dwte_rows, const float* dout, const int32_t* tokens, int64_t v0, int64_t V_rows,
                             int64_t N, int64_t C);

// x (B, T, C) += pos (T, C), in place.
void position_add_forward(float* x, const float* pos, int64_t B, int64_t T, int64_t C);
// The same over rows [row0, row0 + rows) of (B T, C), held in x (rows, C):
// x's row i is row row0 + i and gets pos[(row0 + i) % T] (a
// sequence-parallel rank's rows, which may start and end mid-sequence).
void position_add_rows_forward(float* x, const float* pos, int64_t row0, int64_t rows, int64_t T, int64_t C);
// dpos (T, C) += sum over b of dout (B, T, C).
void position_add_backward(float* dpos, const float* dout, int64_t B, int64_t T, int64_t C);

// Cuts images into non-overlapping P x P patches, row-major over the patch grid.
// pixels (B, ch, H, W) planar; patches (B, (H/P) * (W/P), ch * P * P), each
// patch flattened as (ch, py, px), the order of a PyTorch Conv2d weight.
void patchify(float* patches, const float* pixels, int64_t B, int64_t ch, int64_t H, int64_t W, int64_t P);

// out (B, C) = mean over t of inp (B, T, C).
void meanpool_forward(float* out, const float* inp, int64_t B, int64_t T, int64_t C);
// dinp (B, T, C) = dout (B, C) / T, written.
void meanpool_backward(float* dinp, const float* dout, int64_t B, int64_t T, int64_t C);

}  // namespace meshtrain::kernels
