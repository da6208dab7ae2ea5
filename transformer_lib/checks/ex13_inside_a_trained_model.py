"""Checks for lesson 13's exercises: the induction score from attention weights, the loss of each head's
mean-ablation, and one step of activation patching with a forward hook."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..device import set_seed
from ..gpt import GPT, GPTConfig
from ..induction import half_losses, induction_score, induction_targets, repeated_tokens
from ..interpret import ablate_heads, head_output_means, patched_logits, residual_stream
from ._feedback import CheckResult, Exercise, Hint


def _weights_and_tokens() -> tuple[torch.Tensor, torch.Tensor]:
    """A causal attention pattern (T = 10, random rows that sum to 1) and a sequence whose half repeats, plus one
    token that also occurs twice inside the first half, so that an earlier occurrence is not always half back."""
    tokens = torch.tensor([4, 7, 1, 4, 9, 4, 7, 1, 4, 9])
    generator = torch.Generator().manual_seed(13)
    scores = torch.randn(10, 10, generator=generator, dtype=torch.float64)
    scores = scores.masked_fill(torch.ones(10, 10, dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(dim=-1), tokens  # (T, T), (T,)


def induction_score_of(student_fn: Callable) -> CheckResult:
    """Check a function (weights (T, T), tokens (T,)) -> float: one head's induction score on one sequence."""
    ex = Exercise("induction_score_of")
    with ex.run():
        weights, tokens = _weights_and_tokens()
        expected = induction_score(weights[None, None], tokens[None]).item()
        got = ex.call(student_fn, weights.clone(), tokens.clone())
        same = tokens[:, None] == tokens[None, :]
        earlier = same & torch.ones(10, 10, dtype=torch.bool).tril(-1)  # (T, T): earlier occurrences
        has_earlier = earlier.any(-1)
        on_occurrence = (weights * earlier).sum(-1)[has_earlier].mean().item()
        targets = induction_targets(tokens[None])[0]
        over_all_queries = (weights * targets).sum(-1).mean().item()
        half_back = torch.arange(5, 10)
        fixed_offset = weights[half_back, half_back - 4].mean().item()  # the key half - 1 back, second half only
        ex.compare(
            "the induction score of a random causal pattern on 4 7 1 4 9 4 7 1 4 9",
            float(got) if isinstance(got, torch.Tensor) and got.numel() == 1 else got,
            expected,
            hint="for each query whose token occurred before, add the weights on the keys just after those earlier "
                 "occurrences; average over those queries only",
            mistakes={
                Hint(idea="off by one: you measured the weight on the earlier occurrence itself; an induction head "
                          "looks at the token *after* it, the one that came next last time",
                     code="key j + 1 for every j < i with tokens[j] == tokens[i]", id="weight-on-occurrence"):
                    on_occurrence,
                Hint(idea="average only over the queries whose token occurred before: the others have nothing to "
                          "copy, and counting them as 0 drags the score down",
                     code="divide by the number of queries with an earlier occurrence, not by T",
                     id="mean-over-all-queries"): over_all_queries,
                Hint(idea="a fixed distance back (half − 1) is right only for a repeat of that length; find the "
                          "earlier occurrences from the tokens (here 4 occurs three times)",
                     code="same = tokens[:, None] == tokens[None, :], keep keys j < i", id="fixed-offset"):
                    fixed_offset,
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


def _ablation_losses(model: GPT, tokens: torch.Tensor, kind: str = "mean", which: int = 1) -> torch.Tensor:
    means = head_output_means(model, tokens)
    losses = torch.zeros(model.config.num_layers, model.config.num_heads, dtype=torch.float64)
    for layer in range(model.config.num_layers):
        for head in range(model.config.num_heads):
            with ablate_heads(model, [(layer, head)], kind, means), torch.no_grad():
                logits = model(tokens)
            if which == 2:
                losses[layer, head] = torch.nn.functional.cross_entropy(
                    logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())
            else:
                losses[layer, head] = half_losses(logits, tokens)[which]
    return losses


def head_ablation_losses(student_fn: Callable) -> CheckResult:
    """Check a function (model, tokens) -> (layers, heads): the repeated-half loss with each head mean-ablated."""
    ex = Exercise("head_ablation_losses")
    with ex.run():
        model, tokens = _small_model()
        expected = _ablation_losses(model, tokens)
        zero = _ablation_losses(model, tokens, kind="zero")
        first_half, whole = _ablation_losses(model, tokens, which=0), _ablation_losses(model, tokens, which=2)
        got = ex.call(student_fn, model, tokens.clone())
        with torch.no_grad():
            unchanged = torch.equal(model(tokens), model(tokens)) and not any(
                module._forward_pre_hooks for module in model.modules())
        ex.compare(
            "the repeated-half loss with each head of a random 2 × 2 model mean-ablated",
            got,
            expected,
            hint="for each (layer, head): inside `with ablate_heads(model, [(layer, head)], 'mean', means)`, run the "
                 "model and keep half_losses(logits, tokens)[1]",
            mistakes={
                Hint(idea="you zero-ablated: this exercise asks for mean-ablation (the heads' mean outputs)",
                     code="ablate_heads(model, [(layer, head)], 'mean', head_output_means(model, tokens))",
                     id="zero-ablation"): zero,
                Hint(idea="that is the loss on the first half; the copying happens in the repeated half",
                     code="half_losses returns (first, repeated): take [1]", id="first-half-loss"): first_half,
                Hint(idea="that is the loss over the whole sequence; measure the repeated half only, where an "
                          "induction head can help",
                     code="half_losses(logits, tokens)[1]", id="whole-sequence-loss"): whole,
            },
            atol=1e-6,
        )
        ex.require("the model has no hook left and computes as before", unchanged,
                   problem="a hook is still registered on the model",
                   hint=Hint(idea="a hook you register stays on the model until it is removed",
                             code="use ablate_heads as a `with` block, or call handle.remove() on each hook",
                             id="hook-left-behind"))
    return ex.result


def patch_residual(student_fn: Callable) -> CheckResult:
    """Check a function (model, tokens, depth, position, replacement) -> logits: one activation patch."""
    ex = Exercise("patch_residual")
    with ex.run():
        model, tokens = _small_model()
        corrupted = tokens.clone()
        corrupted[:, 2] = (corrupted[:, 2] + 1) % 12
        clean = residual_stream(model, tokens)  # (layers + 1, batch, T, d_model)
        replacement = clean[1, :, 3]  # after block 0, position 3
        expected = patched_logits(model, corrupted, 1, 3, replacement)
        with torch.no_grad():
            unpatched = model(corrupted)
        after_block_1 = patched_logits(model, corrupted, 2, 3, replacement)
        everywhere = _patch_everywhere(model, corrupted, 1, replacement)
        got = ex.call(student_fn, model, corrupted.clone(), 1, 3, replacement.clone())
        ex.compare(
            "the logits with the stream after block 0 patched at position 3",
            got,
            expected,
            hint="register a forward hook on the module whose output is that depth's stream (depth 0: "
                 "model.dropout; depth d: model.blocks[d - 1]), overwrite position `position` and return the output",
            mistakes={
                Hint(idea="nothing changed: the hook must return the modified output (or the patch never reaches the "
                          "next block)",
                     code="output = output.clone(); output[:, position] = replacement; return output",
                     id="output-not-returned"): unpatched,
                Hint(idea="off by one in depth: depth 0 is the embeddings, so depth d is the output of block d − 1",
                     code="modules = [model.dropout, *model.blocks]; modules[depth].register_forward_hook(...)",
                     id="depth-off-by-one"): after_block_1,
                Hint(idea="you replaced every position: patch only the one position asked for",
                     code="output[:, position] = replacement", id="every-position"): everywhere,
            },
            atol=1e-6,
        )
        ex.require("the model has no hook left afterwards",
                   not any(module._forward_hooks for module in model.modules()),
                   problem="a forward hook is still registered",
                   hint=Hint(idea="a hook you register stays on the model until it is removed",
                             code="keep the handle that register_forward_hook returns and call handle.remove() in a "
                                  "finally: block", id="hook-left-behind"))
        ex.compare("the prediction at position 0 did not change (it cannot see position 3)", got[:, 0],
                   unpatched[:, 0], hint="a patch at position 3 changes positions 3 and later only", atol=1e-6)
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

