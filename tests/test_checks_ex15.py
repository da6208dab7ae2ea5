"""The lesson 15 checks accept the solutions and right answers written other ways, spot stubs, and name typical
mistakes."""

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex15_fine_tuning as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def mask(pairs, pad_id, bug=None):
    length = max(len(p) + len(r) for p, r in pairs) - 1
    inputs = torch.zeros(len(pairs), length, dtype=torch.long) if bug == "zero" else torch.full((len(pairs), length),
                                                                                                pad_id)
    labels = torch.full((len(pairs), length), pad_id if bug in ("padding", "by value") else -100)
    for row, (prompt, response) in enumerate(pairs):
        sequence = torch.cat((prompt, response))
        n = len(sequence) - 1
        inputs[row, :n] = sequence[:-1]
        labels[row, :n] = sequence[:-1] if bug == "unshifted" else sequence[1:]
        masked = {"prompt": 0, "first": len(prompt), "last": max(0, len(prompt) - 2)}.get(bug, len(prompt) - 1)
        labels[row, :masked] = -100
        if bug == "early":  # the labels stop one token early: the end marker's label is lost
            labels[row, n - 1] = -100
    if bug == "by value":  # padding found by its value: the pad id is also the end marker
        labels[labels == pad_id] = -100
    return inputs, labels.float() if bug == "float" else labels  # float: -100.0 fills, as torch.ones(...) * -100


def mask_left_padded(pairs, pad_id):
    """Wrong: the solution's rows, padded on the left."""
    inputs, labels = mask(pairs, pad_id)
    shifts = [inputs.shape[1] - (len(p) + len(r) - 1) for p, r in pairs]
    return (torch.stack([row.roll(k) for row, k in zip(inputs, shifts, strict=True)]),
            torch.stack([row.roll(k) for row, k in zip(labels, shifts, strict=True)]))


def diagnoses(result):
    return [d["mistake"] for d in result.diagnoses]


def once(result):
    """``result``, after asserting that it names one mistake at most: one mistake, one diagnosis."""
    assert len(result.diagnoses) <= 1, result.lines
    return result


def mask_vectorised(pairs, pad_id):
    """Right too: padded with pad_sequence, the prompt and the padding masked by comparing positions."""
    sequences = [torch.cat((prompt, response)) for prompt, response in pairs]
    padded = nn.utils.rnn.pad_sequence(sequences, batch_first=True, padding_value=pad_id)  # (batch, T + 1)
    positions = torch.arange(padded.shape[1] - 1)  # (T,)
    prompt_ends = torch.tensor([len(p) - 1 for p, _ in pairs])[:, None]  # (batch, 1)
    row_ends = torch.tensor([len(s) - 1 for s in sequences])[:, None]  # (batch, 1)
    keep = (positions >= prompt_ends) & (positions < row_ends)  # (batch, T)
    return padded[:, :-1], torch.where(keep, padded[:, 1:], -100)


class LoRA(nn.Module):
    def __init__(self, base, rank, alpha, bug=None):
        super().__init__()
        if bug == "frozen copy":  # correct too: the module's own base is frozen, the caller's layer untouched
            base = copy.deepcopy(base)
        self.base = base if bug == "trainable" else base.requires_grad_(False)
        self.scale = {"no scale": 1.0, "inverted": rank / alpha, "floored": alpha // rank}.get(bug, alpha / rank)
        dtype = torch.float32 if bug == "float32" else base.weight.dtype  # float32: torch.randn's default
        self.lora_A = nn.Parameter(torch.zeros(rank, base.in_features, dtype=dtype))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, dtype=dtype))
        if bug == "a ones":  # rank 1 for good: every row of A the same
            nn.init.ones_(self.lora_A)
        elif bug == "b ones":  # A zero, every column of B the same: rank 1 for good too
            nn.init.ones_(self.lora_B)
        elif bug in ("a zero b random", "b detached"):  # correct: B A = 0 and A gets a gradient at once
            nn.init.normal_(self.lora_B)
        elif bug != "both zero":
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        if bug == "both random":
            nn.init.normal_(self.lora_B)
        if bug == "two rows equal":
            with torch.no_grad():
                self.lora_A[1] = self.lora_A[0]
        if bug == "b frozen":
            self.lora_B.requires_grad_(False)
        self.bug = bug

    def forward(self, x):
        if self.bug == "transposed":
            return self.base(x) + self.scale * x @ (self.lora_B @ self.lora_A)
        if self.bug == "detached":
            return self.base(x) + self.scale * (x @ self.lora_A.detach().T) @ self.lora_B.detach().T
        if self.bug == "a detached":  # B (zero) still gets a gradient at the first step; A never trains
            return self.base(x) + self.scale * (x @ self.lora_A.detach().T) @ self.lora_B.T
        if self.bug == "b detached":  # A (zero) gets one at the first step; B never trains
            return self.base(x) + self.scale * (x @ self.lora_A.T) @ self.lora_B.detach().T
        if self.bug == "merged weight":  # correct too: one product with W + scale · B A
            return F.linear(x, self.base.weight + self.scale * self.lora_B @ self.lora_A, self.base.bias)
        if self.bug == "base without grad":  # correct too: the frozen base needs no graph
            with torch.no_grad():
                frozen = self.base(x)
            return frozen + self.scale * (x @ self.lora_A.T) @ self.lora_B.T
        if self.bug == "flattened":  # a 2-D output for (batch, T, in) inputs
            x = x.reshape(-1, x.shape[-1])
        if self.bug == "linear":  # correct too, written with F.linear
            return self.base(x) + self.scale * F.linear(F.linear(x, self.lora_A), self.lora_B)
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
                       dtype=torch.float32 if bug == "float32" else base.weight.dtype)
    with torch.no_grad():
        if bug == "in place":
            base.weight += update
            merged.weight.copy_(base.weight)
        else:
            merged.weight.copy_(base.weight + update)
        if bug != "no bias" and base.bias is not None:
            merged.bias.copy_(base.bias)
    return merged


def merge_another_way(layer):
    """Right too: the weight as x Wᵀ's transpose trick, through addmm, and the bias set only when there is one."""
    base = layer.base
    merged = nn.Linear(base.in_features, base.out_features, bias=False, dtype=base.weight.dtype)
    merged.weight = nn.Parameter(torch.addmm(base.weight, layer.lora_B, layer.lora_A, alpha=layer.scale).detach())
    if base.bias is not None:
        merged.bias = nn.Parameter(base.bias.detach().clone())
    return merged


def merge_deepcopy(layer):
    """Right too: a copy of the base, the update added to the copy's weight."""
    merged = copy.deepcopy(layer.base)
    with torch.no_grad():
        merged.weight += layer.scale * layer.lora_B @ layer.lora_A
    return merged


def merging(bug):
    return lambda layer: merge(layer, bug)


def test_stubs_are_not_attempted(capsys):
    checks = (check.response_mask, check.lora_parameter_count, check.lora_layer, check.merge_lora_layer)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def test_the_mask_check_pads_with_the_lessons_end_marker():
    pad_id = check._tokenizer().ids[check.END]
    for _, pairs in check._batches():
        assert all(response[-1].item() == pad_id for _, response in pairs)  # every response ends with the pad id
    assert any(not prompt.is_contiguous() for _, pairs in check._batches() for prompt, _ in pairs)


def test_response_mask_accepts_right_answers_and_names_each_mistake():
    assert check.response_mask(mask).ok
    assert check.response_mask(mask_vectorised).ok
    assert_diagnosed(check.response_mask(masking("prompt")), "prompt-in-loss")
    assert_diagnosed(check.response_mask(masking("first")), "first-answer-token-masked")
    assert_diagnosed(check.response_mask(masking("last")), "last-prompt-token-counted")
    assert_diagnosed(check.response_mask(masking("padding")), "padding-counted")
    assert_diagnosed(check.response_mask(masking("by value")), "padding-masked-by-value")
    assert_diagnosed(check.response_mask(masking("unshifted")), "labels-not-shifted")
    assert_rejected_with(check.response_mask(masking("prompt")), "the prompt is in the loss")
    assert_rejected_with(check.response_mask(masking("by value")), "also the end marker")
    assert_rejected_with(check.response_mask(lambda pairs, pad_id: mask(pairs, pad_id)[1]),
                         "returns two tensors (inputs, labels)")


def test_response_mask_names_each_mistake_of_the_inputs_and_the_types_once():
    assert_diagnosed(once(check.response_mask(mask_left_padded)), "padded-on-the-left")  # not the labels again
    assert_diagnosed(once(check.response_mask(masking("zero"))), "padded-with-zero")
    assert_diagnosed(once(check.response_mask(masking("float"))), "ids-not-long")  # right values, float labels
    # a row whose labels stop one token early gives the labels of padding masked by value: the hint names both
    early = check.response_mask(masking("early"))
    assert_diagnosed(early, "padding-masked-by-value")
    assert_rejected_with(early, "stop one token early")


def test_response_mask_tries_a_batch_without_padding_and_edge_lengths():
    def longest_row_unpadded(pairs, pad_id):  # right only when every row has the batch's length
        inputs, labels = mask(pairs, pad_id)
        if len(pairs) == 1:
            return inputs, labels
        return inputs, torch.where(inputs == pad_id, inputs, labels)

    def one_token_prompt_breaks(pairs, pad_id):  # labels[row, :len(prompt) - 2] masks almost all for T_p = 1
        inputs, labels = mask(pairs, pad_id)
        for row, (prompt, _) in enumerate(pairs):
            labels[row, : len(prompt) - 2] = -100
        return inputs, labels

    assert not check.response_mask(longest_row_unpadded).ok
    result = check.response_mask(one_token_prompt_breaks)
    assert not result.ok
    assert any("responses of 6, 1 and 2 tokens" in line for line in result.lines), result.lines


def count(n_in, n_out, rank, bug=None):
    return {"base": n_in * n_out + n_out + rank * (n_in + n_out), "one": rank * n_in, "product": n_in * n_out,
            "bias": rank * (n_in + n_out) + rank + n_out}.get(bug, rank * (n_in + n_out))


def test_lora_parameter_count_accepts_right_answers_and_names_each_mistake():
    assert check.lora_parameter_count(count).ok
    assert check.lora_parameter_count(lambda i, o, r: r * i + o * r).ok
    assert_diagnosed(check.lora_parameter_count(lambda i, o, r: count(i, o, r, "base")), "count-includes-base")
    assert_diagnosed(check.lora_parameter_count(lambda i, o, r: count(i, o, r, "one")), "count-one-matrix")
    assert_diagnosed(check.lora_parameter_count(lambda i, o, r: count(i, o, r, "product")), "count-product")
    assert_diagnosed(check.lora_parameter_count(lambda i, o, r: count(i, o, r, "bias")), "count-with-bias")
    assert check.lora_parameter_count(lambda i, o, r: float(count(i, o, r))).ok  # 24.0 is 24
    assert not check.lora_parameter_count(lambda i, o, r: count(i, o, r) + 0.4).ok  # 24.4 is not


def test_lora_layer_accepts_every_right_start_and_writing():
    assert check.lora_layer(LoRA).ok
    assert check.lora_layer(lora_with("frozen copy")).ok  # freezing its own copy of the base is right too
    assert check.lora_layer(lora_with("a zero b random")).ok  # B A = 0 at the start, and A gets a gradient
    assert check.lora_layer(lora_with("linear")).ok
    assert check.lora_layer(lora_with("merged weight")).ok
    assert check.lora_layer(lora_with("base without grad")).ok


def test_lora_layer_names_each_mistake():
    assert_diagnosed(check.lora_layer(lora_with("trainable")), "base-trainable")
    assert_diagnosed(once(check.lora_layer(lora_with("both random"))), "update-nonzero-at-start")
    assert_diagnosed(check.lora_layer(lora_with("both zero")), "both-zero")
    assert_diagnosed(once(check.lora_layer(lora_with("detached"))), "no-gradient")
    # one adapter detached: the first step still trains the other, so the check sets both non-zero and looks again
    assert_diagnosed(once(check.lora_layer(lora_with("a detached"))), "adapter-detached")
    assert_diagnosed(once(check.lora_layer(lora_with("b detached"))), "adapter-detached")
    assert_rejected_with(check.lora_layer(lora_with("a detached")), "forward cuts lora_A out of the graph")
    assert_diagnosed(once(check.lora_layer(lora_with("b frozen"))), "adapter-frozen")  # not also "no gradient"
    assert_diagnosed(once(check.lora_layer(lora_with("float32"))), "adapter-dtype")  # named, not a crash
    assert_diagnosed(check.lora_layer(lora_with("a ones")), "equal-directions")
    assert_diagnosed(check.lora_layer(lora_with("b ones")), "equal-directions")
    assert_diagnosed(check.lora_layer(lora_with("two rows equal")), "equal-directions")
    assert_diagnosed(check.lora_layer(lora_with("no scale")), "scale-missing")
    assert_diagnosed(check.lora_layer(lora_with("inverted")), "scale-inverted")
    assert_diagnosed(check.lora_layer(lora_with("floored")), "scale-floored")
    assert_diagnosed(check.lora_layer(lora_with("transposed")), "transposed-update")
    assert_rejected_with(check.lora_layer(lora_with("both random")), "B A is not zero at the start")
    assert_rejected_with(check.lora_layer(lora_with("both zero")), "both start at zero")
    assert_rejected_with(check.lora_layer(lora_with("a ones")), "Draw A at random")
    assert_rejected_with(check.lora_layer(lora_with("b ones")), "Draw B at random")
    assert_rejected_with(check.lora_layer(lora_with("flattened")), "expected shape (2, 3, 7), got shape (6, 7)")
    hints = " ".join(check.lora_layer(lora_with("a zero b random")).lines + check.lora_layer(LoRA).lines)
    assert "hint" not in hints  # no hint, true or false, for a right start


def test_merge_accepts_right_answers_and_names_each_mistake():
    assert check.merge_lora_layer(merge).ok
    assert check.merge_lora_layer(merge_another_way).ok
    assert check.merge_lora_layer(merge_deepcopy).ok
    # one mistake, one diagnosis: the output and the other layers do not name it again
    assert_diagnosed(once(check.merge_lora_layer(merging("no scale"))), "merge-scale-missing")
    assert_diagnosed(once(check.merge_lora_layer(merging("transposed"))), "merge-transposed")
    assert_diagnosed(check.merge_lora_layer(merging("twice")), "merged-twice")
    assert_diagnosed(once(check.merge_lora_layer(merging("no bias"))), "bias-dropped")
    assert_diagnosed(once(check.merge_lora_layer(merging("in place"))), "merged-in-place")  # not "bias-none-added"
    assert_diagnosed(once(check.merge_lora_layer(merging("float32"))), "merged-dtype")  # named, not a crash
    assert_rejected_with(check.merge_lora_layer(merging("in place")), "in place")
    assert_diagnosed(check.merge_lora_layer(merging("bias added")), "bias-none-added")
    crashes = check.merge_lora_layer(lambda layer: merge(layer) if layer.base.bias is not None else layer.base.bias.t())
    assert_rejected_with(crashes, "bias=None")
    def square_only(layer):  # right on the square layer, the update transposed on another
        return merge(layer, None if layer.base.in_features == layer.base.out_features else "transposed")

    square_only = check.merge_lora_layer(square_only)
    assert_rejected_with(square_only, "5 -> 7")
