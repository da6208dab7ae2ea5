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
from .positions import (
    LearnedPositionalEmbedding,
    PositionalEncoding,
    apply_rope,
    shift_rotation,
    sinusoidal_encoding,
)
from .torch_interop import copy_multihead_weights

__all__ = [  # the lead consolidates
    *globals().get("__all__", []),
    "KVCache",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "PositionalEncoding",
    "apply_rope",
    "causal_mask",
    "copy_multihead_weights",
    "merge_heads",
    "padding_mask",
    "shift_rotation",
    "sinusoidal_encoding",
    "split_heads",
]

# --- layers, model, data, training (lessons 07-09)
from .data import TranslationTask, Vocabulary, make_translation_task
from .decoding import greedy_decode
from .layers import DecoderLayer, DecoderLayerCache, EncoderLayer, LayerNorm
from .model import DecoderCache, Transformer, TransformerConfig, count_parameters
from .torch_interop import copy_decoder_layer_weights, copy_encoder_layer_weights
from .training import (
    TrainingConfig,
    exact_match,
    label_smoothed_cross_entropy,
    load_checkpoint,
    save_checkpoint,
    shift_for_teacher_forcing,
    train_translation_model,
    transformer_lr,
)

__all__ = [*globals().get("__all__", []),  # the lead consolidates __all__
    "DecoderCache",
    "DecoderLayer",
    "DecoderLayerCache",
    "EncoderLayer",
    "LayerNorm",
    "TrainingConfig",
    "Transformer",
    "TransformerConfig",
    "TranslationTask",
    "Vocabulary",
    "copy_decoder_layer_weights",
    "copy_encoder_layer_weights",
    "count_parameters",
    "exact_match",
    "greedy_decode",
    "label_smoothed_cross_entropy",
    "load_checkpoint",
    "make_translation_task",
    "save_checkpoint",
    "shift_for_teacher_forcing",
    "train_translation_model",
    "transformer_lr",
]

# --- decoding, decoder-only models, chunked attention (lessons 10-11)
from .chunked_attention import chunked_attention, online_softmax_update
from .decoding import beam_search, sample, sample_next_token, top_k_filter, top_p_filter
from .gpt import GPT, CharTokenizer, GPTConfig, generate, train_gpt, zen_of_python

__all__ = [*globals().get("__all__", []),  # the lead consolidates __all__
    "GPT", "CharTokenizer", "GPTConfig", "beam_search", "chunked_attention", "generate", "online_softmax_update",
    "sample", "sample_next_token", "top_k_filter", "top_p_filter", "train_gpt", "zen_of_python",
]

__all__ = [
    "cosine_similarity",
    "get_device",
    "set_seed",
]
