"""Checks for lesson 08's exercises: counting a configuration's parameters, the encoder-decoder model assembled from
lesson 07's layers (a wrong one is also run beside the library's ``Transformer``, and
:func:`~transformer_lib.compare.compare_models` says where they part), the output head."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from ..masks import causal_mask, padding_mask
from ..model import Transformer, TransformerConfig, count_parameters
from ._feedback import CheckResult, Exercise, Hint, describe_mismatch
from .ex07_encoder_decoder_blocks import _where_it_differs, _with_where

CONFIGURATIONS = [  # (vocab_size, d_model, d_ff, num_layers)
    (100, 16, 64, 1),
    (50, 8, 20, 3),  # d_ff is not 4 d_model here
    (37000, 512, 2048, 6),
    (37000, 1024, 4096, 6),
]


def _counted(vocab_size: int, d_model: int, d_ff: int, num_layers: int) -> int:
    with torch.device("meta"):  # shapes only
        config = TransformerConfig(vocab_size, vocab_size, d_model=d_model, num_heads=1, d_ff=d_ff,
                                   num_encoder_layers=num_layers, num_decoder_layers=num_layers)
        model = Transformer(config)  # the number of heads does not change the count
    return count_parameters(model)


def _without_biases(vocab_size: int, d_model: int, d_ff: int, num_layers: int) -> int:
    weights_per_encoder = 4 * d_model * d_model + 2 * d_model * d_ff
    weights_per_decoder = 8 * d_model * d_model + 2 * d_model * d_ff
    return vocab_size * d_model + num_layers * (weights_per_encoder + weights_per_decoder)


def _without_norms(vocab_size: int, d_model: int, d_ff: int, num_layers: int) -> int:
    return _counted(vocab_size, d_model, d_ff, num_layers) - num_layers * (2 + 3) * 2 * d_model


def _without_cross_attention(vocab_size: int, d_model: int, d_ff: int, num_layers: int) -> int:
    return _counted(vocab_size, d_model, d_ff, num_layers) - num_layers * (4 * d_model * d_model + 4 * d_model)


def parameter_count(student_fn: Callable[[int, int, int, int], int]) -> CheckResult:
    """Check ``parameter_count(vocab_size, d_model, d_ff, num_layers)`` for the paper's shared-vocabulary model."""
    ex = Exercise("parameter_count")
    with ex.run():
        for vocab_size, d_model, d_ff, num_layers in CONFIGURATIONS:
            args = (vocab_size, d_model, d_ff, num_layers)
            expected = _counted(*args)
            mistakes = {Hint("you counted the output projection separately: the paper ties it to the embedding matrix",
                             id="tied-output-counted-twice"): expected + vocab_size * d_model,
                        Hint("you left out the biases and LayerNorm parameters", id="biases-left-out"):
                        _without_biases(*args),
                        Hint("you left out the LayerNorm parameters: each norm has a weight and a bias of d_model "
                             "entries", id="layer-norms-left-out"): _without_norms(*args),
                        Hint("a decoder layer has two attention blocks: its cross-attention has four projections of "
                             "its own", id="cross-attention-not-counted"): _without_cross_attention(*args)}
            if d_ff != 4 * d_model:
                mistakes[Hint("you took d_ff = 4 d_model: use the d_ff argument, which is not always four times "
                              "d_model", id="d-ff-argument-ignored")] = _counted(vocab_size, d_model, 4 * d_model,
                                                                                 num_layers)
            if not ex.compare(f"vocab {vocab_size}, d_model {d_model}, d_ff {d_ff}, {num_layers}+{num_layers} layers",
                              ex.call(student_fn, *args), expected, atol=0, rtol=0,
                              hint="per encoder layer: 4 attention projections, 2 FFN linears, 2 LayerNorms (weights "
                                   "and biases); a decoder layer has 8 projections and 3 norms; one shared embedding",
                              mistakes=mistakes):
                break  # the first failure stops: one hint, one diagnosis
    return ex.result


ASSEMBLY_CONFIGS = {  # separate vocabularies, an untied output layer with a bias, no dropout
    "post-LN (the paper)": TransformerConfig(11, 13, d_model=8, num_heads=2, num_encoder_layers=2,
                                             num_decoder_layers=2, d_ff=16, dropout=0.0, max_len=16,
                                             share_embeddings=False, tie_output=False),
    "pre-LN": TransformerConfig(11, 13, d_model=8, num_heads=2, num_encoder_layers=2, num_decoder_layers=2, d_ff=16,
                                dropout=0.0, max_len=16, norm_first=True, share_embeddings=False, tie_output=False),
}
PART_NAMES = ("src_embedding", "tgt_embedding", "encoder_layers", "decoder_layers", "encoder_norm", "decoder_norm",
              "output_projection")


def _assembly_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """src (batch 2, S=5) with two <pad> in the second sentence, tgt (2, T=4) below both vocabulary sizes, src_mask."""
    src = torch.tensor([[3, 4, 5, 6, 2], [3, 7, 2, 0, 0]])  # 0 = <pad>
    tgt = torch.tensor([[1, 8, 9, 10], [1, 6, 5, 4]])  # ids < 11: the source table could look them up too
    return src, tgt, padding_mask(src, pad_id=0)


def _reference_model(config: TransformerConfig) -> Transformer:
    with torch.random.fork_rng(devices=[]):  # leave the learner's random numbers as they were
        torch.manual_seed(8)
        model = Transformer(config).double().eval()
    with torch.no_grad():  # distinct LayerNorm scales and shifts, so that a forgotten norm shows
        for name, parameter in model.named_parameters():
            if "norm" in name:
                parameter.copy_(torch.linspace(0.5, 1.5, parameter.numel(), dtype=torch.float64)
                                if name.endswith("weight") else torch.linspace(-0.3, 0.3, parameter.numel(),
                                                                               dtype=torch.float64))
    return model


def _walk_through(model: Transformer, src: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor | None, *,
                 scale: bool = True, positions: bool = True, encoder_mask: bool = True, causal: bool = True,
                 memory_mask: bool = True, memory: str = "memory", encoder_norm: bool = True,
                 decoder_norm: bool = True, target_table: str = "tgt", softmax: bool = False) -> torch.Tensor:
    """``model(src, tgt, src_mask)`` (eval mode) written out from its parts; each keyword turns one step into a
    classic mistake (``tests/test_checks_ex08.py`` shows the defaults equal the model)."""
    d_model = model.config.d_model

    def embed(table: nn.Embedding, tokens: torch.Tensor) -> torch.Tensor:
        x = table(tokens) * (math.sqrt(d_model) if scale else 1.0)  # (batch, length, d_model)
        return x + model.positions[: tokens.shape[1]] if positions else x

    x = embed(model.src_embedding, src)  # (batch, S, d_model)
    embedded_source = x
    for layer in model.encoder_layers:
        x = layer(x, src_mask if encoder_mask else None)
    encoded = {"memory": model.encoder_norm(x) if encoder_norm else x, "embedded source": embedded_source}[memory]
    y = embed(model.tgt_embedding if target_table == "tgt" else model.src_embedding, tgt)  # (batch, T, d_model)
    tgt_mask = causal_mask(tgt.shape[1]) if causal else None  # (T, T)
    for layer in model.decoder_layers:
        y = layer(y, encoded, tgt_mask=tgt_mask, memory_mask=src_mask if memory_mask else None)
    logits = model.output_projection(model.decoder_norm(y) if decoder_norm else y)  # (batch, T, V_tgt)
    return torch.softmax(logits, dim=-1) if softmax else logits


ASSEMBLY_MISTAKES = {
    Hint(idea="the token embeddings are not scaled: the library multiplies them by √d_model before adding the "
              "positions (lesson 08, 'Embeddings, scaled, plus positions')",
         code="x = self.src_embedding(src) * math.sqrt(d_model) + self.positions[:S]", id="embeddings-not-scaled"):
        {"scale": False},
    Hint(idea="the positional encodings are missing: add the first S (or T) rows of the sinusoidal table to the "
              "scaled embeddings, in both stacks",
         code="x = self.src_embedding(src) * math.sqrt(d_model) + self.positions[: src.shape[1]]",
         id="positions-missing"): {"positions": False},
    Hint(idea="the decoder's self-attention is not causal: position i must not see the target tokens after it",
         code="tgt_mask = causal_mask(tgt.shape[1]); y = layer(y, memory, tgt_mask=tgt_mask, memory_mask=src_mask)",
         id="decoder-not-causal"): {"causal": False},
    Hint(idea="the cross-attention reads the embedded source: its keys and values come from the memory, the output "
              "of the whole encoder stack (after its final norm)",
         code="memory = self.encoder_norm(x) after the encoder loop; then layer(y, memory, …) in the decoder loop",
         id="cross-attention-to-embeddings"): {"memory": "embedded source"},
    Hint(idea="padded source tokens are visible to the cross-attention: the decoder layers need the source mask too",
         code="layer(y, memory, tgt_mask=tgt_mask, memory_mask=src_mask)", id="memory-mask-missing"):
        {"memory_mask": False},
    Hint(idea="the encoder's self-attention sees <pad>: pass the source mask to every encoder layer",
         code="for layer in self.encoder_layers: x = layer(x, src_mask)", id="encoder-mask-missing"):
        {"encoder_mask": False},
    Hint(idea="a pre-LN stack ends with one more LayerNorm, and you left out both final norms (the encoder's on the "
              "memory, the decoder's before the output projection)",
         code="memory = self.encoder_norm(x); logits = self.output_projection(self.decoder_norm(y))",
         id="final-norms-missing"): {"encoder_norm": False, "decoder_norm": False},
    Hint(idea="the decoder's final LayerNorm is missing: a pre-LN decoder normalises once more before the output "
              "projection",
         code="logits = self.output_projection(self.decoder_norm(y))", id="decoder-final-norm-missing"):
        {"decoder_norm": False},
    Hint(idea="the encoder's final LayerNorm is missing: in pre-LN the memory is the normalised output of the "
              "encoder stack",
         code="memory = self.encoder_norm(x)  # after the encoder loop", id="encoder-final-norm-missing"):
        {"encoder_norm": False},
    Hint(idea="the target was looked up in the source embedding table: each language has its own table here",
         code="y = self.tgt_embedding(tgt) * math.sqrt(d_model) + self.positions[: tgt.shape[1]]",
         id="target-in-source-table"): {"target_table": "src"},
    Hint("return logits, not probabilities: the softmax belongs to the loss", id="softmax-applied"): {"softmax": True},
}


def _load_hint(missing: list[str], unexpected: list[str]) -> str:
    """Say which parts are misnamed or misbuilt, from the keys load_state_dict could not match."""
    names = ", ".join(PART_NAMES)
    if any(key.startswith(("encoder_norm", "decoder_norm")) for key in missing + unexpected):
        return ("build the final norms as the library does: LayerNorm(d_model) when config.norm_first (pre-LN), "
                "nn.Identity() otherwise (post-LN has no final norm)")
    misfits = set(missing + unexpected)
    if "output_projection.bias" in misfits and "output_projection.weight" not in misfits:
        return "the output projection here is an nn.Linear(d_model, tgt_vocab_size) with a bias (tie_output=False)"
    return f"give the parts the library's names so its weights load: {names} (and nothing else with weights)"


def encoder_decoder_model(student_cls: Callable[[TransformerConfig], nn.Module]) -> CheckResult:
    """Check a module class ``EncoderDecoder(config)`` whose ``forward(src, tgt, src_mask)`` is lesson 08's model.

    For a post-LN and a pre-LN configuration: the learner's model is built, given the library model's weights with
    ``load_state_dict`` and compared with ``Transformer.forward`` (float64, eval mode); each classic mistake of the
    assembly (scale, positions, masks, memory, final norms, embedding table, softmax) is named.
    """
    ex = Exercise("encoder_decoder_model")
    with ex.run():
        src, tgt, src_mask = _assembly_inputs()
        for label, config in ASSEMBLY_CONFIGS.items():
            reference = _reference_model(config)
            with torch.random.fork_rng(devices=[]):
                model = ex.call(student_cls, config, description=f"EncoderDecoder(config) for {label}")
            if not ex.require(f"{label}: EncoderDecoder(config) is an nn.Module", isinstance(model, nn.Module),
                              problem=f"got {type(model).__name__}",
                              hint="subclass nn.Module and call super().__init__() first"):
                return ex.result
            model = model.double().eval()
            loaded = model.load_state_dict(reference.state_dict(), strict=False)
            missing, unexpected = list(loaded.missing_keys), list(loaded.unexpected_keys)
            shown = ", ".join((missing + unexpected)[:4])
            if not ex.require(f"{label}: the library model's weights load into yours", not missing and not unexpected,
                              problem=f"{len(unexpected)} of the library's tensors found no place in your model "
                                      f"and {len(missing)} of yours got none ({shown})",
                              hint=_load_hint(missing, unexpected)):
                return ex.result
            with torch.no_grad():
                expected = reference(src, tgt, src_mask=src_mask)  # (batch, T, V_tgt)
                mistakes = {hint: _walk_through(reference, src, tgt, src_mask, **flags)
                            for hint, flags in ASSEMBLY_MISTAKES.items()}
                got = ex.call(model, src, tgt, src_mask, description="your model's forward(src, tgt, src_mask)")
            hint = ("encode (scaled embeddings + positions, the encoder layers with the source mask, final norm), "
                    "then decode (the same for the target, the decoder layers with the causal mask, the memory and "
                    "the source mask, final norm) and project every position")
            if describe_mismatch(got, expected) is not None:  # every hint says where the model parts from the library's
                where = _where_it_differs(model, reference, src, tgt, src_mask,
                                         what=f"Your model ({label}) run beside the library's on the same input")
                hint, mistakes = _with_where(hint, where), {_with_where(h, where): v for h, v in mistakes.items()}
            if not ex.compare(f"{label}: logits equal Transformer's, batch 2, S=5 (two <pad>), T=4, "
                              f"{config.tgt_vocab_size} target tokens", got, expected, hint=hint, mistakes=mistakes):
                break  # the first failure stops: one hint, one diagnosis
    return ex.result


BATCH, LENGTH, D_MODEL, VOCAB = 2, 3, 4, 5  # all different: each classic bug gives another shape or crashes
FLATTENED_IDEA = ("you flattened the T positions into one vector per sentence: the vocabulary layer reads d_model "
                  "numbers, so apply it to every position on its own and keep the T axis")
TRANSPOSED_IDEA = "weight is (vocab, d_model), laid out like nn.Linear's: it must be transposed for the product"
TRANSPOSED_CODE = "decoder_output @ weight.T + bias, or torch.nn.functional.linear(decoder_output, weight, bias)"
SHAPE_HINTS = {
    (BATCH, VOCAB): Hint(FLATTENED_IDEA, id="positions-flattened"),
    (BATCH * LENGTH, VOCAB): Hint("you merged batch and positions into rows: give back (batch, T, vocab), one row "
                                  "of logits per position of each sentence", id="batch-and-positions-merged"),
    (BATCH, VOCAB, LENGTH): Hint("your logits are (batch, vocab, T): keep the vocabulary last, as the model's "
                                 "output layer does, and do not transpose the result", id="vocabulary-not-last"),
}


def _output_layer(weight: torch.Tensor, bias: torch.Tensor) -> torch.nn.Linear:
    """The output layer of an untied Transformer of the exercise's sizes, holding ``weight`` and ``bias``."""
    config = TransformerConfig(VOCAB, VOCAB, d_model=D_MODEL, num_heads=1, d_ff=8, num_encoder_layers=1,
                               num_decoder_layers=1, dropout=0.0, tie_output=False)
    with torch.random.fork_rng():  # leave the learner's random numbers as they were
        layer = Transformer(config).output_projection.to(weight.dtype)
    with torch.no_grad():
        layer.weight.copy_(weight)
        layer.bias.copy_(bias)
    return layer


def _gives(student_fn: Callable[..., object], args: tuple[torch.Tensor, ...], *candidates: torch.Tensor) -> bool:
    """Whether the student's function runs on ``args`` and returns one of ``candidates``."""
    try:
        got = student_fn(*args)
    except Exception:
        return False
    return any(describe_mismatch(got, candidate) is None for candidate in candidates)


def _crash_hint(student_fn: Callable[..., object], x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
                ) -> str | Hint:
    """Name the bug behind a crash by running the student's function where that bug cannot crash."""
    one_position = x[:, :1]  # (batch, 1, d_model): flattening T·d_model gives d_model numbers here
    per_sentence = one_position[:, 0] @ weight.T  # (batch, vocab)
    if _gives(student_fn, (one_position, weight, bias), per_sentence + bias, per_sentence):
        return Hint("your function only runs when T = 1: " + FLATTENED_IDEA, id="positions-flattened")
    square_weight, square_bias = weight[:D_MODEL], bias[:D_MODEL]  # vocab = d_model: a transposed weight fits
    transposed = x @ square_weight  # (batch, T, d_model)
    if _gives(student_fn, (x, square_weight, square_bias), transposed + square_bias, transposed):
        return Hint(idea="your function only runs when vocab = d_model: " + TRANSPOSED_IDEA, code=TRANSPOSED_CODE,
                    id="weight-not-transposed")
    return ("a shape error: apply the (vocab, d_model) weight to the last dimension of the (batch, T, d_model) "
            "decoder output")


def output_logits(student_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check ``output_logits(decoder_output, weight, bias)``: (batch, T, d_model), (V, d_model), (V,) -> (batch, T, V).

    Every classic bug gets its hint: flattening the positions, a transposed weight (both crash; a second run on sizes
    where they do not crash names them), a missing bias, a softmax, or the logits laid out (batch, V, T).
    """
    ex = Exercise("output_logits")
    with ex.run():
        generator = torch.Generator().manual_seed(80)
        x = torch.randn(BATCH, LENGTH, D_MODEL, generator=generator, dtype=torch.float64)  # decoder output
        weight = torch.randn(VOCAB, D_MODEL, generator=generator, dtype=torch.float64)
        bias = torch.randn(VOCAB, generator=generator, dtype=torch.float64)
        with torch.no_grad():
            expected = _output_layer(weight, bias)(x)  # (batch, T, vocab)
        if not callable(student_fn):
            ex.call(student_fn)  # reports "expected a function" and stops the checks
        what = f"logits for every position, shape {tuple(expected.shape)}"
        try:
            got = student_fn(x, weight, bias)
        except NotImplementedError:
            raise
        except Exception as error:
            ex.require(what, False, problem=f"your function raised {type(error).__name__}: {error}",
                       hint=_crash_hint(student_fn, x, weight, bias))
            return ex.result
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else None
        if shape in SHAPE_HINTS:
            ex.require(what, False, problem=f"got shape {shape}", hint=SHAPE_HINTS[shape])
            return ex.result
        ex.compare(what, got, expected,
                   hint=Hint(idea="apply the same vocabulary layer (weight and bias) to every position's vector",
                             code="decoder_output @ weight.T + bias"),
                   mistakes={Hint("you left out the bias: add it after the product", id="bias-left-out"):
                                 x @ weight.T,
                             Hint("return logits, not probabilities: the softmax belongs to the loss",
                                  id="softmax-applied"): torch.softmax(expected, dim=-1),
                             Hint("return logits, not log-probabilities: the loss takes the log-softmax itself",
                                  id="log-softmax-applied"): torch.log_softmax(expected, dim=-1)})
    return ex.result
