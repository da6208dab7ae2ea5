"""Looking inside a trained GPT with PyTorch's forward hooks: attention patterns, the residual stream, the logit lens,
head ablation and activation patching (of the residual stream, or of one attention projection's input). No
interpretability library: each function registers a hook on one of the course's modules (``register_forward_hook``
/ ``register_forward_pre_hook``), runs the model once and removes it.

Where the model's numbers live (a pre-LN ``GPT``, lesson 11):

- the **residual stream** (lesson 04) after the embeddings is the output of ``model.dropout`` (token + position
  embedding); after block l it is the output of ``model.blocks[l]``. ``residual_stream`` returns the
  ``num_layers + 1`` snapshots, index 0 = embeddings, index l + 1 = after block l.
- each head's output is a slice of the input of ``self_attn.out_proj``: ``merge_heads`` lays the heads' outputs side
  by side, head h in features ``h * d_head … (h + 1) * d_head``, before ``W^O`` mixes them. Ablating head h replaces
  that slice (``ablate_heads``).
- block l's attention reads ``norm1`` of the stream (``attention_input``); its ``q_proj``, ``k_proj`` and ``v_proj``
  each take that one tensor, so a forward pre-hook on one of them changes the queries, the keys or the values alone
  (``patched_projection_logits``).

Shape legend: batch, T = positions, d_model = model width, heads, d_head = d_model / heads, V = vocabulary size,
layers = number of blocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from .gpt import GPT
from .multi_head import record_attention

ABLATIONS = ("zero", "mean")
PROJECTIONS = ("q", "k", "v")  # an attention layer's query, key and value projections: q_proj, k_proj, v_proj


def attention_patterns(model: GPT, tokens: torch.Tensor) -> torch.Tensor:
    """Every head's attention weights on ``tokens`` (batch, T): (layers, batch, heads, T, T), rows sum to 1.

    ``record_attention`` (lesson 06's module) runs the model once with forward hooks that ask each block's attention
    for its weights (the readable path of lesson 03) and keep them.
    """
    recorded = record_attention(model, tokens)  # {"blocks.0.self_attn": (batch, heads, T, T), …}
    return torch.stack([recorded[f"blocks.{layer}.self_attn"] for layer in range(len(model.blocks))])


@torch.no_grad()
def residual_stream(model: GPT, tokens: torch.Tensor) -> torch.Tensor:
    """The residual stream at every depth: (layers + 1, batch, T, d_model); index 0 holds the embeddings, index
    l + 1 the stream after block l (the last one is what the final LayerNorm and the head read)."""
    snapshots: list[torch.Tensor] = []
    record = lambda module, args, output: snapshots.append(output)  # noqa: E731
    handles = [model.dropout.register_forward_hook(record)]
    handles += [block.register_forward_hook(record) for block in model.blocks]
    try:
        model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack(snapshots)  # (layers + 1, batch, T, d_model)


def logit_lens(model: GPT, residual: torch.Tensor) -> torch.Tensor:
    """Unembed any residual stream as if it were the last: the final LayerNorm, then the head.

    ``residual``: (…, d_model) -> logits (…, V). On the stream after the last block this is the model's own output.
    """
    return model.head(model.final_norm(residual))  # (…, V)


def token_ranks(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The rank of each target among the logits, 0 = the top prediction: logits (…, V), targets (…) -> (…) long;
    targets broadcast over leading dimensions (e.g. one row of targets for the logits of every depth).

    Ties count against the target (it ranks below every token with an equal logit), so a flat prediction never
    reads as a correct one.
    """
    targets = targets.expand(logits.shape[:-1])  # (…)
    target_logit = logits.gather(-1, targets[..., None])  # (…, 1)
    return (logits >= target_logit).sum(-1) - 1  # (…)


def head_output_means(model: GPT, tokens: torch.Tensor, per_position: bool = False) -> torch.Tensor:
    """Each head's output averaged over the batch of ``tokens`` (batch, T), the values mean-ablation puts in place
    of a head's output: averaged over the positions too, (layers, heads, d_head); or, with ``per_position=True``,
    one mean per position, (layers, heads, T, d_head), for sequences of one layout (every row the same length, the
    repeat at the same place), so that a position's replacement is what the head usually writes there."""
    heads, d_head = model.config.num_heads, model.config.d_model // model.config.num_heads
    over = (0,) if per_position else (0, 1)
    means: list[torch.Tensor] = []

    def record(module, args):
        merged = args[0].mean(dim=over)  # (T, d_model) or (d_model,)
        means.append(merged.unflatten(-1, (heads, d_head)).movedim(-2, 0))  # (heads, T, d_head) or (heads, d_head)

    handles = [block.self_attn.out_proj.register_forward_pre_hook(record) for block in model.blocks]
    try:
        with torch.no_grad():
            model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack(means)  # (layers, heads, d_head) or (layers, heads, T, d_head)


@contextmanager
def ablate_heads(
    model: GPT, heads: Iterable[tuple[int, int]], kind: str = "mean", means: torch.Tensor | None = None
) -> Iterator[GPT]:
    """Inside the ``with`` block, the listed ``(layer, head)`` pairs are ablated in every forward pass of ``model``.

    ``kind="zero"`` sets the head's output to 0; ``kind="mean"`` to its mean output ``means`` (from
    :func:`head_output_means`, computed on typical inputs; per position or not): the head then carries no
    information about the sequence but still adds its usual contribution, so the rest of the model sees a stream of
    the size it was trained on. A forward pre-hook on ``out_proj`` rewrites the head's slice of its input.
    """
    if kind not in ABLATIONS:
        raise ValueError(f"kind={kind!r} is unknown: choose one of {ABLATIONS}")
    if kind == "mean" and means is None:
        raise ValueError("mean-ablation needs the heads' mean outputs: pass means=head_output_means(model, tokens)")
    num_layers, num_heads = model.config.num_layers, model.config.num_heads
    d_head = model.config.d_model // num_heads
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        if not (0 <= layer < num_layers and 0 <= head < num_heads):
            raise ValueError(f"head ({layer}, {head}) does not exist: the model has layers 0..{num_layers - 1} "
                             f"and heads 0..{num_heads - 1}")
        by_layer.setdefault(layer, []).append(head)

    def hook_for(layer: int):
        def replace(module, args):
            merged = args[0].clone()  # (batch, T, d_model): the heads' outputs side by side
            for head in by_layer[layer]:
                part = slice(head * d_head, (head + 1) * d_head)
                merged[..., part] = 0.0 if kind == "zero" else means[layer, head]  # (d_head,) or (T, d_head)
            return (merged,)
        return replace

    handles = [model.blocks[layer].self_attn.out_proj.register_forward_pre_hook(hook_for(layer)) for layer in by_layer]
    try:
        yield model
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def patched_logits(
    model: GPT, tokens: torch.Tensor, depth: int, position: int, replacement: torch.Tensor
) -> torch.Tensor:
    """Activation patching: run ``tokens`` (batch, T) but overwrite the residual stream at one ``depth`` (0 = the
    embeddings, l + 1 = after block l, as in :func:`residual_stream`) and one ``position`` with ``replacement``
    (batch, d_model), usually the same place of another run. Returns the logits (batch, T, V)."""
    modules = [model.dropout, *model.blocks]
    if not 0 <= depth < len(modules):
        raise ValueError(f"depth={depth} does not exist: 0 is the embeddings, 1..{len(modules) - 1} the outputs "
                         "of the blocks")

    def overwrite(module, args, output):
        output = output.clone()
        output[:, position] = replacement  # (batch, d_model)
        return output

    handle = modules[depth].register_forward_hook(overwrite)
    try:
        return model(tokens)
    finally:
        handle.remove()


def _mean_log_prob(logits: torch.Tensor, position: int, target: torch.Tensor) -> torch.Tensor:
    """The mean over the batch of log p(``target``) predicted at ``position``: logits (batch, T, V), target (batch,)."""
    log_probs = F.log_softmax(logits[:, position], dim=-1)  # (batch, V)
    return log_probs.gather(-1, target[:, None]).mean()


@torch.no_grad()
def trace_residual(
    model: GPT, clean: torch.Tensor, corrupted: torch.Tensor, position: int, target: torch.Tensor
) -> torch.Tensor:
    """Causal tracing over the residual stream: for every depth and every position, patch the clean run's stream
    into the corrupted run and measure the log-probability of ``target`` (batch,) predicted at ``position``.

    ``clean``/``corrupted``: (batch, T) token ids that differ in a few positions. Returns (layers + 1, T): the mean
    over the batch of log p(target), one patch at a time; places where patching restores the clean value carry the
    information that the corruption removed.
    """
    clean_stream = residual_stream(model, clean)  # (layers + 1, batch, T, d_model)
    return torch.stack([
        torch.stack([_mean_log_prob(patched_logits(model, corrupted, depth, pos, clean_stream[depth, :, pos]),
                                    position, target) for pos in range(clean.shape[1])])
        for depth in range(clean_stream.shape[0])
    ])  # (layers + 1, T)


def _changed_positions(clean: torch.Tensor, corrupted: torch.Tensor) -> torch.Tensor:
    """(T,) bool: the positions whose token differs between ``clean`` and ``corrupted`` (batch, T) in some row."""
    if clean.shape != corrupted.shape:
        raise ValueError(f"clean {tuple(clean.shape)} and corrupted {tuple(corrupted.shape)} must have one shape")
    changed = (clean != corrupted).any(dim=0)  # (T,)
    if not changed.any():
        raise ValueError("clean and corrupted are the same tokens: corrupt at least one position")
    return changed


def residual_patch_reach(clean: torch.Tensor, corrupted: torch.Tensor, position: int, num_layers: int) -> torch.Tensor:
    """Where :func:`trace_residual` can measure anything: (layers + 1, T) bool, False where a patch restores exactly
    nothing by construction, whatever the weights.

    A patch changes the prediction at ``position`` only where the two runs' streams differ and the place reaches
    ``position``. The embeddings differ only at the corrupted tokens; after a block, causal attention has spread the
    difference to every later position, never to an earlier one. A stream reaches ``position`` from any position up
    to it, except after the last block, where only ``position``'s own stream is unembedded.
    """
    changed = _changed_positions(clean, corrupted)  # (T,)
    at = torch.arange(clean.shape[1])  # (T,)
    differs_after_a_block = at >= int(changed.nonzero()[0])  # (T,): from the first corrupted position on
    reach = torch.zeros(num_layers + 1, clean.shape[1], dtype=torch.bool)
    reach[0] = changed & (at <= position)
    reach[1:num_layers] = differs_after_a_block & (at <= position)
    reach[num_layers] = differs_after_a_block & (at == position)
    return reach  # (layers + 1, T)


def projection_patch_reach(
    clean: torch.Tensor, corrupted: torch.Tensor, layer: int, position: int, num_layers: int
) -> torch.Tensor:
    """Where :func:`trace_projections` can measure anything: (3, T) bool in the order of ``PROJECTIONS``, False
    where a patch restores exactly nothing by construction.

    Block ``layer``'s attention input differs between the runs where the stream before it differs (only at the
    corrupted tokens before block 0, from the first of them on after). A key or a value at position j reaches the
    query at ``position`` only for j <= ``position`` (causal attention); a query serves its own position, so in the
    last block only the query at ``position`` matters, in an earlier one any query up to it.
    """
    changed = _changed_positions(clean, corrupted)  # (T,)
    at = torch.arange(clean.shape[1])  # (T,)
    differs = changed if layer == 0 else at >= int(changed.nonzero()[0])  # (T,)
    query_reach = at == position if layer == num_layers - 1 else at <= position
    return torch.stack([differs & query_reach, differs & (at <= position), differs & (at <= position)])  # (3, T)


@torch.no_grad()
def attention_input(model: GPT, tokens: torch.Tensor, layer: int) -> torch.Tensor:
    """What block ``layer``'s attention reads on ``tokens`` (batch, T): the LayerNormed residual stream, the one
    input of its query, key and value projections. (batch, T, d_model)."""
    captured: list[torch.Tensor] = []
    handle = model.blocks[layer].self_attn.register_forward_pre_hook(lambda module, args: captured.append(args[0]))
    try:
        model(tokens)
    finally:
        handle.remove()
    return captured[0]  # (batch, T, d_model)


@torch.no_grad()
def patched_projection_logits(
    model: GPT, tokens: torch.Tensor, layer: int, projection: str, position: int, replacement: torch.Tensor
) -> torch.Tensor:
    """Activation patching of one input only: run ``tokens`` (batch, T) but give block ``layer``'s ``projection``
    (``"q"``, ``"k"`` or ``"v"``: ``W^Q``, ``W^K`` or ``W^V``) ``replacement`` (batch, d_model) as its input at
    ``position``; the other two projections read the run's own input. A forward pre-hook on that ``nn.Linear``
    (``self_attn.k_proj`` …) does it. Returns the logits (batch, T, V)."""
    if projection not in PROJECTIONS:
        raise ValueError(f"projection={projection!r} is unknown: choose one of {PROJECTIONS}")

    def overwrite(module, args):
        x = args[0].clone()  # (batch, T, d_model)
        x[:, position] = replacement
        return (x,)

    handle = getattr(model.blocks[layer].self_attn, f"{projection}_proj").register_forward_pre_hook(overwrite)
    try:
        return model(tokens)
    finally:
        handle.remove()


@torch.no_grad()
def trace_projections(
    model: GPT, clean: torch.Tensor, corrupted: torch.Tensor, layer: int, position: int, target: torch.Tensor
) -> torch.Tensor:
    """Like :func:`trace_residual`, but one projection's input of block ``layer`` at a time: for each of W^Q, W^K,
    W^V and each position, the clean run's attention input patched into the corrupted run for that projection only.
    Returns (3, T): the mean log p(``target``) predicted at ``position``, rows in the order of ``PROJECTIONS``."""
    clean_input = attention_input(model, clean, layer)  # (batch, T, d_model)
    return torch.stack([
        torch.stack([_mean_log_prob(patched_projection_logits(model, corrupted, layer, projection, pos,
                                                              clean_input[:, pos]), position, target)
                     for pos in range(clean.shape[1])])
        for projection in PROJECTIONS
    ])  # (3, T)
