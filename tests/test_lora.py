"""Our LoRA (transformer_lib/lora.py) equals Hugging Face PEFT's on the course's GPT, with copied adapter weights in
float64; starts as the base model, freezes it, and merges into plain linear layers that compute the same."""

import copy

import pytest
import torch
from torch import nn

from transformer_lib import GPT, GPTConfig
from transformer_lib.lora import LORA_TARGETS, LoRALinear, add_lora, merge_lora, trainable_parameters

RANK, ALPHA = 2, 6.0


def small_gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=13, block_size=16, d_model=16, num_heads=2, num_layers=2, d_ff=32)).double()


def trained_adapters(model: nn.Module) -> nn.Module:
    """Give every B random values, as training would (at the start B is zero and LoRA adds nothing)."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, LoRALinear):
                module.lora_B.copy_(torch.randn(module.lora_B.shape, dtype=torch.float64, generator=generator))
    return model


def tokens() -> torch.Tensor:
    return torch.randint(13, (3, 16), generator=torch.Generator().manual_seed(2))  # (batch, T)


def test_our_lora_equals_peft_on_the_course_gpt_with_copied_adapters():
    peft = pytest.importorskip("peft")
    base = small_gpt()
    ours = trained_adapters(add_lora(copy.deepcopy(base), RANK, ALPHA))
    config = peft.LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=list(LORA_TARGETS), lora_dropout=0.0)
    theirs = peft.get_peft_model(copy.deepcopy(base), config).eval()
    adapted = {name: module for name, module in ours.named_modules() if isinstance(module, LoRALinear)}
    assert len(adapted) == 2 * len(LORA_TARGETS)
    with torch.no_grad():
        for name, module in adapted.items():
            layer = theirs.base_model.model.get_submodule(name)
            layer.lora_A["default"].weight.copy_(module.lora_A)  # (r, in) in both
            layer.lora_B["default"].weight.copy_(module.lora_B)  # (out, r) in both
    assert trainable_parameters(ours)[0] == sum(p.numel() for p in theirs.parameters() if p.requires_grad)
    x = tokens()
    with torch.no_grad():
        ours_logits, theirs_logits = ours.eval()(x), theirs(x)
    assert (ours_logits - base(x)).abs().max() > 1e-3  # the adapters change the output: the comparison means something
    torch.testing.assert_close(ours_logits, theirs_logits)  # float64 defaults: rtol 1e-7, atol 1e-7
    merged = theirs.merge_and_unload()
    for name, module in adapted.items():
        torch.testing.assert_close(module.merged().weight, merged.get_submodule(name).weight)


def test_lora_starts_as_the_base_model_and_trains_only_its_adapters():
    base = small_gpt()
    model = add_lora(copy.deepcopy(base), RANK, ALPHA)
    x = tokens()
    assert torch.equal(model(x), base(x))  # B = 0: the update adds exact zeros
    trainable, total = trainable_parameters(model)
    names = {name for name, p in model.named_parameters() if p.requires_grad}
    assert names and all(name.endswith(("lora_A", "lora_B")) for name in names)
    per_layer = {"q_proj": 16 + 16, "k_proj": 16 + 16, "v_proj": 16 + 16, "out_proj": 16 + 16, "linear1": 16 + 32,
                 "linear2": 32 + 16}  # r · (in + out) / r
    assert trainable == 2 * RANK * sum(per_layer.values())
    assert total == sum(p.numel() for p in base.parameters()) + trainable
    model(x).sum().backward()
    assert all(p.grad is None for name, p in model.named_parameters() if name not in names)
    lora_b = model.blocks[0].linear1.lora_B
    assert lora_b.grad is not None and lora_b.grad.abs().sum() > 0  # A random: B gets a gradient at once


def test_merging_gives_plain_linear_layers_with_the_same_outputs():
    model = trained_adapters(add_lora(small_gpt(), RANK, ALPHA))
    merged = merge_lora(model)
    assert not any(isinstance(m, LoRALinear) for m in merged.modules())
    assert any(isinstance(m, LoRALinear) for m in model.modules())  # the original is left as it was
    x = tokens()
    torch.testing.assert_close(merged(x), model(x))


def test_bad_ranks_and_missing_targets_say_what_to_do():
    with pytest.raises(ValueError, match="rank=9 must lie between 1 and min"):
        LoRALinear(nn.Linear(4, 8), rank=9, alpha=1.0)
    with pytest.raises(ValueError, match="no nn.Linear named"):
        add_lora(small_gpt(), RANK, ALPHA, targets=("c_attn",))
