"""transformer_lib: the course's teaching library.

The core (this package's modules) needs only torch and NumPy, so it runs headless, in tests and in benchmarks.
Plots and widgets live in ``transformer_lib.views``; exercise checks in ``transformer_lib.checks``.

Conventions (as in PyTorch): tensors are batch-first, ``(batch, seq, d_model)``; a boolean attention mask is True
where attention is allowed, as in ``torch.nn.functional.scaled_dot_product_attention``.
"""

# --- device and seeds (lesson 00)
from .device import get_device, set_seed

# --- similarity (lesson 01)
from .similarity import cosine_similarity, most_similar_word, word_feature_table

__all__ = [*globals().get("__all__", []), "most_similar_word", "word_feature_table"]  # lead consolidates

# --- attention (lessons 02-03)
from .attention import scaled_dot_product_attention, softmax

__all__ = [*globals().get("__all__", []), "scaled_dot_product_attention", "softmax"]  # the lead consolidates

# --- positions, masks, multi-head attention (lessons 04-06)
from .masks import causal_mask, padding_mask
from .multi_head import KVCache, MultiHeadAttention, merge_heads, split_heads
from .positions import LearnedPositionalEmbedding, PositionalEncoding, apply_rope, sinusoidal_encoding
from .torch_interop import copy_multihead_weights

__all__ = [*globals().get("__all__", []),  # noqa: PLE0605  (the lead consolidates __all__)
    "KVCache",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "PositionalEncoding",
    "apply_rope",
    "causal_mask",
    "copy_multihead_weights",
    "merge_heads",
    "padding_mask",
    "sinusoidal_encoding",
    "split_heads",
]

# --- layers, model, data, training (lessons 07-09)

# --- decoding, decoder-only models, chunked attention (lessons 10-11)

__all__ = [
    "cosine_similarity",
    "get_device",
    "set_seed",
]
