"""The lesson 15 checks accept the solutions, spot stubs, and name typical mistakes."""

import copy
import math

import torch
from torch import nn

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex15_fine_tuning as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def mask(pairs, pad_id, bug=None):
    length = max(len(p) + len(r) for p, r in pairs) - 1
    inputs = torch.full((len(pairs), length), pad_id)
    labels = torch.full((len(pairs), length), pad_id if bug == "padding" else -100)
    for row, (prompt, response) in enumerate(pairs):
        sequence = torch.cat((prompt, response))
        n = len(sequence) - 1
        inputs[row, :n] = sequence[:-1]
        labels[row, :n] = sequence[:-1] if bug == "unshifted" else sequence[1:]
        masked = {"prompt": 0, "first": len(prompt), "last": len(prompt) - 2}.get(bug, len(prompt) - 1)
        labels[row, :masked] = -100
    return inputs, labels


class LoRA(nn.Module):
    def __init__(self, base, rank, alpha, bug=None):
        super().__init__()
        if bug == "frozen copy":  # correct too: the module's own base is frozen, the caller's layer untouched
            base = copy.deepcopy(base)
        self.base = base if bug == "trainable" else base.requires_grad_(False)
        self.scale = {"no scale": 1.0, "inverted": rank / alpha}.get(bug, alpha / rank)
        self.lora_A = nn.Parameter(torch.zeros(rank, base.in_features, dtype=base.weight.dtype))
        if bug != "a zero":
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, dtype=base.weight.dtype))
        if bug == "b random":
            nn.init.normal_(self.lora_B)
        self.bug = bug

    def forward(self, x):
        if self.bug == "transposed":
            return self.base(x) + self.scale * x @ (self.lora_B @ self.lora_A)
        return self.base(x) + self.scale * (x @ self.lora_A.T) @ self.lora_B.T


def masking(bug):
    return lambda pairs, pad_id: mask(pairs, pad_id, bug)


def lora_with(bug):
    return lambda base, rank, alpha: LoRA(base, rank, alpha, bug)


def merge(layer, bug=None):
    base = layer.base
    update = (layer.lora_B @ layer.lora_A).detach()
    update = {"no scale": update, "transposed": layer.scale * update.T, "twice": 2 * layer.scale * update}.get(
        bug, layer.scale * update)
    has_bias = base.bias is not None or bug == "bias added"
    merged = nn.Linear(base.in_features, base.out_features, bias=bug != "no bias" and has_bias,
                       dtype=base.weight.dtype)
    with torch.no_grad():
        if bug == "in place":
            base.weight += update
            merged.weight.copy_(base.weight)
        else:
            merged.weight.copy_(base.weight + update)
        if bug != "no bias" and base.bias is not None:
            merged.bias.copy_(base.bias)
    return merged


def merging(bug):
    return lambda layer: merge(layer, bug)


def test_stubs_are_not_attempted(capsys):
    checks = (check.response_mask, check.lora_parameter_count, check.lora_layer, check.merge_lora_layer)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def test_response_mask_accepts_the_solution_and_names_each_mistake():
    assert check.response_mask(mask).ok
    assert_diagnosed(check.response_mask(masking("prompt")), "prompt-in-loss")
    assert_diagnosed(check.response_mask(masking("first")), "first-answer-token-masked")
    assert_diagnosed(check.response_mask(masking("last")), "last-prompt-token-counted")
    assert_diagnosed(check.response_mask(masking("padding")), "padding-counted")
    assert_diagnosed(check.response_mask(masking("unshifted")), "labels-not-shifted")
    assert_rejected_with(check.response_mask(masking("prompt")),
                         "the prompt is in the loss")
    assert_rejected_with(check.response_mask(lambda pairs, pad_id: mask(pairs, pad_id)[1]),
                         "returns two tensors (inputs, labels)")


def count(n_in, n_out, rank, bug=None):
    return {"base": n_in * n_out + n_out + rank * (n_in + n_out), "one": rank * n_in, "product": n_in * n_out,
            "bias": rank * (n_in + n_out) + rank + n_out}.get(bug, rank * (n_in + n_out))


def test_lora_parameter_count_accepts_the_solution_and_names_each_mistake():
    assert check.lora_parameter_count(count).ok
    assert_diagnosed(check.lora_parameter_count(lambda i, o, r: count(i, o, r, "base")), "count-includes-base")
    assert_diagnosed(check.lora_parameter_count(lambda i, o, r: count(i, o, r, "one")), "count-one-matrix")
    assert_diagnosed(check.lora_parameter_count(lambda i, o, r: count(i, o, r, "product")), "count-product")
    assert_diagnosed(check.lora_parameter_count(lambda i, o, r: count(i, o, r, "bias")), "count-with-bias")


def test_lora_layer_accepts_the_solution_and_names_each_mistake():
    assert check.lora_layer(LoRA).ok
    assert check.lora_layer(lora_with("frozen copy")).ok  # freezing its own copy of the base is right too
    assert_diagnosed(check.lora_layer(lora_with("trainable")), "base-trainable")
    assert_diagnosed(check.lora_layer(lora_with("b random")), "b-random")
    assert_diagnosed(check.lora_layer(lora_with("a zero")), "a-zero")
    assert_diagnosed(check.lora_layer(lora_with("no scale")), "scale-missing")
    assert_diagnosed(check.lora_layer(lora_with("inverted")), "scale-inverted")
    assert_diagnosed(check.lora_layer(lora_with("transposed")), "transposed-update")
    assert_rejected_with(check.lora_layer(lora_with("b random")), "B starts at zero")


def test_merge_accepts_the_solution_and_names_each_mistake():
    assert check.merge_lora_layer(merge).ok
    assert_diagnosed(check.merge_lora_layer(merging("no scale")), "merge-scale-missing")
    assert_diagnosed(check.merge_lora_layer(merging("transposed")), "merge-transposed")
    assert_diagnosed(check.merge_lora_layer(merging("twice")), "merged-twice")
    assert_diagnosed(check.merge_lora_layer(merging("no bias")), "bias-dropped")
    assert_diagnosed(check.merge_lora_layer(merging("in place")), "merged-in-place")
    assert_rejected_with(check.merge_lora_layer(merging("in place")), "in place")
    assert_diagnosed(check.merge_lora_layer(merging("bias added")), "bias-none-added")
    crashes = check.merge_lora_layer(lambda layer: merge(layer) if layer.base.bias is not None else layer.base.bias.t())
    assert_rejected_with(crashes, "bias=None")
