"""Checks for lesson 13's exercises: a duplicate-token score from attention weights, the chance level of the
induction score counted from the tokens alone, and one step of activation patching with a forward hook."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..device import set_seed
from ..gpt import GPT, GPTConfig
from ..induction import (
    duplicate_token_score,
    earlier_occurrences,
    induction_score,
    repeated_tokens,
    uniform_attention,
)
from ..interpret import patched_logits, residual_stream
from ._feedback import CheckResult, Exercise, Hint

# Sequences the two scores are checked on: 4 occurs four times (so a query can have several earlier occurrences,
# not always half a sequence back), and in the second 2 follows itself (the key after that occurrence is the query
# itself).
SEQUENCES = (torch.tensor([4, 7, 1, 4, 9, 4, 7, 1, 4, 9]), torch.tensor([2, 2, 5, 3, 2, 5, 3, 8]))
ALL_QUERIES = Hint(idea="average only over the queries whose token occurred before: the others have nothing to look "
                        "back at, and counting them as 0 drags the score down",
                   code="divide by the number of queries with an earlier occurrence, not by T",
                   id="mean-over-all-queries")


def _random_causal_weights(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """(…, T, T) random attention weights, zero above the diagonal, rows summing to 1 (float64)."""
    length = shape[-1]
    scores = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return scores.masked_fill(torch.ones(length, length, dtype=torch.bool).triu(1), float("-inf")).softmax(dim=-1)


def _as_number(value):
    """A one-element tensor as a float; anything else unchanged (the comparison then says what is wrong)."""
    return float(value) if isinstance(value, torch.Tensor) and value.numel() == 1 else value


def _per_query(weights: torch.Tensor, keys: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """The summed weight on ``keys`` (batch, T, T) bool, averaged over ``queries`` (batch, T) bool and the batch:
    ``weights`` (batch, heads, T, T) -> (heads,)."""
    on_keys = (weights * keys[:, None]).sum(-1)  # (batch, heads, T)
    return (on_keys * queries[:, None]).sum(dim=(0, 2)) / queries.sum()


def duplicate_token_score_of(student_fn: Callable) -> CheckResult:
    """Check a function (weights (batch, heads, T, T), tokens (batch, T)) -> (heads,): every head's duplicate-token
    score over a batch."""
    ex = Exercise("duplicate_token_score_of")
    with ex.run():
        for seed, sequence in enumerate(SEQUENCES):
            tokens = torch.stack([sequence, sequence.flip(0)])  # (2, T): two sequences of the same tokens
            length = tokens.shape[1]
            weights = _random_causal_weights((2, 3, length, length), 13 + seed)  # (batch, heads, T, T)
            expected = duplicate_token_score(weights, tokens)  # (heads,)
            got = ex.call(student_fn, weights.clone(), tokens.clone())
            earlier = earlier_occurrences(tokens)  # (batch, T, T): keys j < i holding the query's token
            has_earlier = earlier.any(-1)  # (batch, T)
            with_self = earlier | torch.eye(length, dtype=torch.bool)  # keys j <= i: the query's own key too
            ex.compare(
                f"three heads' duplicate-token scores on {' '.join(map(str, sequence.tolist()))} and its reverse",
                got,
                expected,
                hint="mask (batch, T, T) = same token at query i and key j, and j < i; sum the weights on the mask "
                     "per query; average over the queries that have an earlier occurrence, in every sequence",
                mistakes={
                    Hint(idea="off by one: you measured the weight on the key after each earlier occurrence, which is "
                              "the induction score; a duplicate-token head looks at the occurrence itself",
                         code="keys j < i with tokens[j] == tokens[i], not j + 1", id="induction-offset"):
                        induction_score(weights, tokens),
                    Hint(idea="every token equals itself: count only keys j < i, not the query's own position i, or "
                              "every head that attends to itself looks like a duplicate-token head",
                         code="same & torch.ones(T, T, dtype=torch.bool).tril(-1): tril(-1), not tril()",
                         id="self-included"):
                        _per_query(weights, with_self, torch.ones_like(has_earlier)),
                    ALL_QUERIES: _per_query(weights, earlier, has_earlier) * has_earlier.sum() / has_earlier.numel(),
                },
                atol=1e-6,
            )
    return ex.result


def uniform_induction_score(student_fn: Callable) -> CheckResult:
    """Check a function tokens (T,) -> float: the induction score of a head attending evenly over its prefix."""
    ex = Exercise("uniform_induction_score")
    with ex.run():
        for tokens in SEQUENCES:
            length = len(tokens)
            expected = induction_score(uniform_attention(length)[None, None], tokens[None]).item()
            got = ex.call(student_fn, tokens.clone())
            counts = earlier_occurrences(tokens[None])[0].sum(-1).double()  # (T,): earlier occurrences per query
            has_earlier = counts > 0
            prefix = torch.arange(1, length + 1, dtype=torch.float64)  # (T,): query i sees i + 1 keys
            ex.compare(
                f"the chance induction score on {' '.join(map(str, tokens.tolist()))}",
                _as_number(got),
                expected,
                hint="query i spreads 1 / (i + 1) over keys 0 … i; its induction weight is that times the number of "
                     "its earlier occurrences; average over the queries that have one",
                mistakes={
                    Hint(idea="query i sees i + 1 keys, itself included: each gets 1 / (i + 1), not 1 / i",
                         code="counts[i] / (i + 1)", id="prefix-without-self"):
                        (counts[has_earlier] / (prefix[has_earlier] - 1)).mean().item(),
                    Hint(idea="a query whose token occurred several times has that many targets: its weight is "
                              "their number over i + 1, not one key's share",
                         code="count every j < i with tokens[j] == tokens[i]", id="one-occurrence-only"):
                        (1 / prefix[has_earlier]).mean().item(),
                    ALL_QUERIES: (counts / prefix)[has_earlier].sum().item() / length,
                },
                atol=1e-6,
            )
    return ex.result


def _small_model() -> tuple[GPT, torch.Tensor]:
    """A random attention-only GPT (2 layers × 2 heads, float64) and repeated sequences for it."""
    set_seed(13)
    model = GPT(GPTConfig(vocab_size=12, block_size=16, d_model=16, num_heads=2, num_layers=2,
                          feed_forward=False)).double().eval()
    tokens = repeated_tokens(6, 6, 12, torch.Generator().manual_seed(13))  # (6, 12)
    return model, tokens


def patch_residual(student_fn: Callable) -> CheckResult:
    """Check a function (model, tokens, depth, position, replacement) -> logits: one activation patch."""
    ex = Exercise("patch_residual")
    with ex.run():
        model, tokens = _small_model()
        corrupted = tokens.clone()
        corrupted[:, 2] = (corrupted[:, 2] + 1) % 12
        clean = residual_stream(model, tokens)  # (layers + 1, batch, T, d_model)
        with torch.no_grad():
            unpatched = model(corrupted)

        def compare_case(depth: int, position: int) -> None:
            replacement = clean[depth, :, position]  # (batch, d_model)
            expected = patched_logits(model, corrupted, depth, position, replacement)
            everywhere = _patch_everywhere(model, corrupted, depth, replacement)
            got = ex.call(student_fn, model, corrupted.clone(), depth, position, replacement.clone())
            where = "in the embeddings (depth 0)" if depth == 0 else f"after block {depth - 1}"
            mistakes = {
                Hint(idea="nothing changed: the hook must return the modified output (or the patch never reaches "
                          "the next block)",
                     code="output = output.clone(); output[:, position] = replacement; return output",
                     id="output-not-returned"): unpatched,
                Hint(idea="you replaced every position: patch only the one position asked for",
                     code="output[:, position] = replacement", id="every-position"): everywhere,
            }
            if depth == 0:
                mistakes[Hint(idea="depth 0 is the embeddings, the output of model.dropout; model.blocks[depth - 1] "
                                   "is model.blocks[-1] there, the last block",
                              code="modules = [model.dropout, *model.blocks]; modules[depth]",
                              id="depth-zero-is-last-block")] = patched_logits(
                    model, corrupted, len(model.blocks), position, replacement)
            else:
                mistakes[Hint(idea="off by one in depth: depth 0 is the embeddings, so depth d is the output of "
                                   "block d − 1",
                              code="modules = [model.dropout, *model.blocks]; modules[depth]",
                              id="depth-off-by-one")] = patched_logits(
                    model, corrupted, depth + 1, position, replacement)
            ex.compare(
                f"the logits with the stream {where} patched at position {position}",
                got,
                expected,
                hint="register a forward hook on the module whose output is that depth's stream (depth 0: "
                     "model.dropout; depth d: model.blocks[d - 1]), overwrite position `position` and return the "
                     "output",
                mistakes=mistakes,
                atol=1e-6,
            )
            ex.compare(f"the prediction at position 0 did not change (it cannot see position {position})",
                       got[:, 0], unpatched[:, 0], hint="a patch at a position changes that position and later ones "
                       "only", atol=1e-6)

        compare_case(1, 3)
        # The model must be as it was before the call: checked after the first call, before a second can mask it.
        hooked = [name or "the model" for name, module in model.named_modules()
                  if module._forward_hooks or module._forward_pre_hooks]
        ex.require("the model has no hook left afterwards", not hooked,
                   problem=f"a hook is still registered on {', '.join(hooked)}",
                   hint=Hint(idea="a hook you register stays on the model until it is removed",
                             code="keep the handle that register_forward_hook returns and call handle.remove() in a "
                                  "finally: block", id="hook-left-behind"))
        with torch.no_grad():
            after = model(corrupted)
        ex.require("the model computes what it computed before your call",
                   torch.allclose(after, unpatched, rtol=0.0, atol=1e-9),
                   problem="its logits on the same tokens changed",
                   hint=Hint(idea="patch the run, not the model: change the activation inside a hook, never a weight",
                             code="output = output.clone(); output[:, position] = replacement inside the hook",
                             id="model-changed"))
        compare_case(0, 2)  # depth 0 is the embeddings, not model.blocks[-1]
    return ex.result


@torch.no_grad()
def _patch_everywhere(model: GPT, tokens: torch.Tensor, depth: int, replacement: torch.Tensor) -> torch.Tensor:
    modules = [model.dropout, *model.blocks]
    handle = modules[depth].register_forward_hook(
        lambda module, args, output: replacement[:, None].expand_as(output).clone())
    try:
        return model(tokens)
    finally:
        handle.remove()

