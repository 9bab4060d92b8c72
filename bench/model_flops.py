"""The benchmarks' one count of a GPT's model FLOPs (PaLM's, as nanoGPT, llm.c,
bench/peers/torch_gpt.py and meshtrain's own flop_per_token count them):

    N   = 12 L d^2 + (V + ctx) d        the products' parameters and the embeddings
    fpt = 6 N + 12 L d ctx              FLOPs per token, forward and backward

A mixture of experts (top_k of n_expert experts in every block's MLP) adds the
top_k - 1 further experts' 8 d^2 and the router's d n_expert per layer to N.
"""


def params(L, d, ctx, vocab=256, top_k=1, n_expert=0):
    return 12 * L * d * d + (vocab + ctx) * d + L * ((top_k - 1) * 8 * d * d + d * n_expert)


def flops_per_token(L, d, ctx, vocab=256, top_k=1, n_expert=0):
    return 6 * params(L, d, ctx, vocab, top_k, n_expert) + 12 * L * d * ctx
