"""transformer_lib: the course's teaching library.

The core (this package's modules) needs only torch and NumPy, so it runs headless, in tests and in benchmarks.
Plots and widgets live in ``transformer_lib.views``; exercise checks in ``transformer_lib.checks``.

Conventions (as in PyTorch): tensors are batch-first, ``(batch, seq, d_model)``; a boolean attention mask is True
where attention is allowed, as in ``torch.nn.functional.scaled_dot_product_attention``.

Modules, in the order the lessons introduce them: device and device_check (00), similarity (01), attention (02-03),
positions (04), masks (05), multi_head and torch_interop (06), layers (07), model (08), data, training, evaluation,
checkpoints and recipes (09), decoding (10), gpt (its character-level text, training loop and losses are the last
sections of data, training and evaluation), chunked_attention and scaling (11), bpe, hub and llama (12), induction
and interpret (13), speculative, quantization and distributed (14; distributed is imported from its module, not
re-exported here).
"""

from .attention import (
    additive_attention_scores,
    entropy_bits,
    scaled_dot_product_attention,
    softmax,
    unit_variance_scores,
)
from .bpe import (
    SPLIT_PATTERN,
    BPETokenizer,
    bpe_merge_steps,
    bytes_to_unicode,
    merge_pair,
    pair_counts,
    pretokenize,
    train_bpe,
)
from .checkpoints import lesson_checkpoint, load_checkpoint, save_checkpoint
from .chunked_attention import chunked_attention, online_softmax_update
from .data import (
    CharTokenizer,
    TranslationTask,
    Vocabulary,
    make_translation_task,
    python_docs,
    random_windows,
    train_valid_split,
    zen_of_python,
)
from .decoding import (
    GreedyWithMargin,
    beam_search,
    beam_search_step,
    cache_nbytes,
    generate,
    generate_tokens,
    generate_translation,
    greedy_decode,
    greedy_pick,
    sample,
    sample_next_token,
    sampling_distribution,
    sampling_picker,
    top_k_filter,
    top_p_filter,
    top_two_gap,
)
from .device import get_device, set_seed, single_thread
from .device_check import DeviceCheckResult, DeviceTarget, check_device
from .evaluation import (
    baseline_losses,
    bigram_probabilities,
    bleu,
    chrf,
    evaluate_lm_loss,
    exact_match,
    translate,
    unigram_probabilities,
)
from .gpt import GPT, Block, CausalSelfAttention, GPTCache, GPTConfig
from .hub import load_hf_gpt2
from .induction import (
    InductionHistory,
    InductionRecipe,
    encode_symbols,
    half_losses,
    induction_score,
    induction_targets,
    phase_change_step,
    previous_token_score,
    repeated_tokens,
    train_induction_model,
    uniform_loss,
)
from .interpret import (
    ablate_heads,
    attention_patterns,
    head_output_means,
    logit_lens,
    patched_logits,
    residual_stream,
    token_ranks,
    trace_residual,
)
from .layers import (
    DecoderLayer,
    DecoderLayerCache,
    EncoderLayer,
    LayerNorm,
    feed_forward_gradient_norms,
    residual_connection,
)
from .llama import (
    GroupedQueryAttention,
    Llama,
    Llama3RopeScaling,
    LlamaBlock,
    LlamaConfig,
    RMSNorm,
    SwiGLU,
    apply_rope_halves,
    expand_kv_heads,
    llama3_rope_frequencies,
    rms_norm,
)
from .masks import MASK_KINDS, build_mask, causal_mask, padding_mask
from .model import (
    DecoderCache,
    Transformer,
    TransformerConfig,
    count_parameters,
    cross_attention_weights,
    encoder_decoder_masks,
    parameter_breakdown,
)
from .multi_head import KVCache, MultiHeadAttention, merge_heads, record_attention, split_heads
from .positions import (
    LearnedPositionalEmbedding,
    PositionalEncoding,
    apply_rope,
    dot_products_by_offset,
    rope_frequencies,
    shift_rotation,
    sinusoidal_encoding,
)
from .quantization import Int8Linear, dequantize_int8, quantize_int8, quantize_linear_layers, state_nbytes
from .recipes import CharGPTRun, char_gpt_config, train_char_gpt, train_translation_model, translation_model_config
from .scaling import fit_power_law, non_embedding_parameters, score_memory_mib
from .similarity import cosine_similarity, most_similar_word, vector_from_polar, word_feature_table
from .speculative import (
    SpeculativeResult,
    acceptance_probability,
    expected_tokens_per_call,
    residual_distribution,
    speculative_accept,
    speculative_generate,
    speculative_token_distribution,
)
from .torch_interop import copy_decoder_layer_weights, copy_encoder_layer_weights, copy_multihead_weights
from .training import (
    LMHistory,
    TrainingConfig,
    label_smoothed_cross_entropy,
    shift_for_teacher_forcing,
    train,
    train_gpt,
    training_step,
    transformer_lr,
    warmup_linear_decay_lr,
)

__all__ = [
    # lesson 00: device and seeds, and whether the device computes right
    "DeviceCheckResult",
    "DeviceTarget",
    "check_device",
    "get_device",
    "set_seed",
    "single_thread",
    # lesson 01: similarity
    "cosine_similarity",
    "most_similar_word",
    "vector_from_polar",
    "word_feature_table",
    # lessons 02-03: attention
    "additive_attention_scores",
    "entropy_bits",
    "scaled_dot_product_attention",
    "softmax",
    "unit_variance_scores",
    # lesson 04: positions
    "LearnedPositionalEmbedding",
    "PositionalEncoding",
    "apply_rope",
    "dot_products_by_offset",
    "rope_frequencies",
    "shift_rotation",
    "sinusoidal_encoding",
    # lesson 05: masks
    "MASK_KINDS",
    "build_mask",
    "causal_mask",
    "padding_mask",
    # lesson 06: multi-head attention, and loading PyTorch's weights
    "KVCache",
    "MultiHeadAttention",
    "copy_multihead_weights",
    "merge_heads",
    "record_attention",
    "split_heads",
    # lesson 07: encoder and decoder layers
    "DecoderLayer",
    "DecoderLayerCache",
    "EncoderLayer",
    "LayerNorm",
    "copy_decoder_layer_weights",
    "copy_encoder_layer_weights",
    "feed_forward_gradient_norms",
    "residual_connection",
    # lesson 08: the full model
    "DecoderCache",
    "Transformer",
    "TransformerConfig",
    "count_parameters",
    "encoder_decoder_masks",
    "parameter_breakdown",
    # lesson 09: data and training
    "TrainingConfig",
    "TranslationTask",
    "Vocabulary",
    "bleu",
    "chrf",
    "cross_attention_weights",
    "exact_match",
    "label_smoothed_cross_entropy",
    "lesson_checkpoint",
    "load_checkpoint",
    "make_translation_task",
    "save_checkpoint",
    "shift_for_teacher_forcing",
    "train",
    "train_translation_model",
    "training_step",
    "transformer_lr",
    "translate",
    "translation_model_config",
    "warmup_linear_decay_lr",
    # lesson 10: decoding
    "beam_search",
    "beam_search_step",
    "cache_nbytes",
    "generate",
    "generate_tokens",
    "generate_translation",
    "greedy_decode",
    "greedy_pick",
    "GreedyWithMargin",
    "top_two_gap",
    "sample",
    "sample_next_token",
    "sampling_distribution",
    "sampling_picker",
    "top_k_filter",
    "top_p_filter",
    # lesson 11: decoder-only models and the cost of attention
    "Block",
    "CausalSelfAttention",
    "CharGPTRun",
    "CharTokenizer",
    "GPT",
    "GPTCache",
    "GPTConfig",
    "LMHistory",
    "baseline_losses",
    "bigram_probabilities",
    "char_gpt_config",
    "chunked_attention",
    "evaluate_lm_loss",
    "fit_power_law",
    "non_embedding_parameters",
    "online_softmax_update",
    "python_docs",
    "random_windows",
    "score_memory_mib",
    "train_char_gpt",
    "train_gpt",
    "train_valid_split",
    "unigram_probabilities",
    "zen_of_python",
    # lesson 12: byte-level BPE, GPT-2 from the Hugging Face Hub and a Llama-style model
    "BPETokenizer",
    "GroupedQueryAttention",
    "Llama",
    "Llama3RopeScaling",
    "LlamaBlock",
    "LlamaConfig",
    "RMSNorm",
    "SPLIT_PATTERN",
    "SwiGLU",
    "apply_rope_halves",
    "bpe_merge_steps",
    "bytes_to_unicode",
    "expand_kv_heads",
    "llama3_rope_frequencies",
    "load_hf_gpt2",
    "merge_pair",
    "pair_counts",
    "pretokenize",
    "rms_norm",
    "train_bpe",
    # lesson 13: inside a trained Transformer (induction heads, hooks, ablation, patching, the logit lens)
    "InductionHistory",
    "InductionRecipe",
    "ablate_heads",
    "attention_patterns",
    "encode_symbols",
    "half_losses",
    "head_output_means",
    "induction_score",
    "induction_targets",
    "logit_lens",
    "patched_logits",
    "phase_change_step",
    "previous_token_score",
    "repeated_tokens",
    "residual_stream",
    "token_ranks",
    "trace_residual",
    "train_induction_model",
    "uniform_loss",
    # lesson 14: speculative decoding and int8 weights (data parallelism: transformer_lib.distributed)
    "Int8Linear",
    "SpeculativeResult",
    "acceptance_probability",
    "dequantize_int8",
    "expected_tokens_per_call",
    "quantize_int8",
    "quantize_linear_layers",
    "residual_distribution",
    "speculative_accept",
    "speculative_generate",
    "speculative_token_distribution",
    "state_nbytes",
]
