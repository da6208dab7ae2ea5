"""Lesson 13's task, scores and recipe: the scores measure what they say, and the recipe grows an induction head
in layer 1 on every seed tried."""

import math
from dataclasses import replace

import pytest
import torch

from bounds import asserted_by, bound, bound_seeds
from transformer_lib import GPT, GPTConfig, set_seed
from transformer_lib.induction import (
    InductionRecipe,
    duplicate_token_score,
    earlier_occurrences,
    fall_per_step,
    half_losses,
    head_scores,
    induction_score,
    induction_targets,
    phase_change_step,
    previous_token_score,
    probe_batch,
    repeated_tokens,
    train_induction_model,
    uniform_attention,
    uniform_loss,
)
from transformer_lib.interpret import (
    ablate_heads,
    attention_patterns,
    head_output_means,
    projection_patch_reach,
    residual_patch_reach,
    trace_projections,
    trace_residual,
)


def one_hot_pattern(length, key_of_query):
    """(1, 1, T, T) weights putting all of query i's weight on key key_of_query(i)."""
    weights = torch.zeros(1, 1, length, length)
    for i in range(length):
        weights[0, 0, i, key_of_query(i)] = 1.0
    return weights


def test_repeated_tokens_repeat_their_first_half():
    tokens = repeated_tokens(5, 7, 20, torch.Generator().manual_seed(0))
    assert tokens.shape == (5, 14) and tokens.dtype == torch.long
    assert torch.equal(tokens[:, :7], tokens[:, 7:])
    assert int(tokens.min()) >= 0 and int(tokens.max()) < 20
    with pytest.raises(ValueError, match="half=1 is too short"):
        repeated_tokens(5, 1, 20, torch.Generator())


def test_half_losses_of_a_uniform_and_a_perfect_predictor():
    tokens = repeated_tokens(3, 6, 10, torch.Generator().manual_seed(1))
    first, repeated = half_losses(torch.zeros(3, 12, 10), tokens)
    assert abs(first.item() - math.log(10)) < 1e-6 and abs(repeated.item() - math.log(10)) < 1e-6
    perfect = torch.full((3, 12, 10), -30.0)
    perfect[:, :-1].scatter_(-1, tokens[:, 1:, None], 30.0)  # position t puts all its mass on token t + 1
    first, repeated = half_losses(perfect, tokens)
    assert first.item() < 1e-6 and repeated.item() < 1e-6
    assert uniform_loss(10) == math.log(10)


def test_the_scores_of_ideal_heads():
    tokens = torch.tensor([[3, 1, 4, 5, 9, 2, 3, 1, 4, 5, 9, 2]])  # half = 6, no repeat inside the first half
    half, length = 6, 12
    previous = one_hot_pattern(length, lambda i: max(i - 1, 0))
    induction = one_hot_pattern(length, lambda i: i - half + 1 if i >= half else i)
    duplicate = one_hot_pattern(length, lambda i: i - half if i >= half else i)  # the off-by-one mistake
    assert previous_token_score(previous).item() == 1.0
    assert induction_score(induction, tokens).item() == 1.0
    assert induction_score(duplicate, tokens).item() == 0.0
    assert duplicate_token_score(duplicate, tokens).item() == 1.0
    assert duplicate_token_score(induction, tokens).item() == 0.0
    assert previous_token_score(induction).item() == 0.0


def test_uniform_attention_scores_its_counted_chance_level():
    weights = uniform_attention(6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(6, dtype=torch.float64))
    assert torch.all(weights.triu(1) == 0)
    tokens = torch.tensor([[5, 6, 5, 7, 5, 6]])  # 5 at 2 (once before) and 4 (twice); 6 at 5 (once)
    chance = induction_score(weights[None, None], tokens).item()
    assert abs(chance - (1 / 3 + 2 / 5 + 1 / 6) / 3) < 1e-12
    assert abs(previous_token_score(weights[None, None]).item() - sum(1 / (i + 1) for i in range(1, 6)) / 5) < 1e-12


def test_induction_targets_follow_every_earlier_occurrence():
    tokens = torch.tensor([[7, 8, 7, 9, 7]])
    targets = induction_targets(tokens)[0]
    assert targets[2].nonzero().flatten().tolist() == [1]  # 7 at 0 is followed by 8
    assert targets[4].nonzero().flatten().tolist() == [1, 3]  # 7 at 0 and at 2
    assert not targets[:2].any() and not targets[3].any()
    with pytest.raises(ValueError, match="no token occurs twice"):
        induction_score(torch.ones(1, 1, 3, 3) / 3, torch.tensor([[1, 2, 3]]))


def test_phase_change_step_uses_a_moving_mean():
    losses = [4.0] * 50 + [0.5] * 50
    assert phase_change_step(losses, level=2.0, window=10) == 56  # the mean of steps 46..55 is 2.25 + …
    assert phase_change_step(losses, level=0.1, window=10) is None


def test_attention_only_blocks_have_no_feed_forward():
    set_seed(0)
    model = GPT(GPTConfig(vocab_size=5, block_size=8, d_model=8, num_heads=2, feed_forward=False)).double()
    names = {name for name, _ in model.named_parameters()}
    assert not any("linear" in name or "norm2" in name for name in names)
    block, x = model.blocks[0], torch.randn(1, 4, 8, dtype=torch.float64)
    torch.testing.assert_close(block(x), x + block.self_attn(block.norm1(x))[0])


SEEDS = bound_seeds((0,))  # the lesson's seed, whose runs load from the cache; `course.py bounds` seeds 0-4


@pytest.fixture(scope="module", params=SEEDS)
def trained(request):
    """Each seed's two-layer model and its one-layer control (the same recipe and budget), trained once per test
    session (the model cache keeps them for later sessions), with held-out repeated sequences of half 10."""
    seed, recipe = request.param, InductionRecipe()
    model, history = train_induction_model(recipe, seed=seed)
    control, _ = train_induction_model(replace(recipe, num_layers=1), seed=seed)
    tokens = repeated_tokens(200, 10, recipe.vocab_size, torch.Generator().manual_seed(100 + seed))
    return recipe, model, history, control, tokens


@pytest.mark.trained
def test_the_recipe_grows_an_induction_head_in_layer_1(trained):
    """The lesson's claims: the repeated half is learned, the first half is not, the head with the top
    induction score sits in layer 1 and the top previous-token head in layer 0, each well above its chance level."""
    recipe, model, history, _, tokens = trained
    with torch.no_grad():
        first, repeated = half_losses(model(tokens), tokens)
    bound("repeated half's loss", repeated.item(), at_most=0.6)
    bound("first half's loss minus uniform's", first.item() - uniform_loss(recipe.vocab_size), at_least=-0.1)
    induction, previous = head_scores(model, tokens)  # (layers, heads) each
    uniform = uniform_attention(tokens.shape[1]).expand(len(tokens), 1, -1, -1)  # (batch, 1, T, T)
    chance_induction, chance_previous = induction_score(uniform, tokens).item(), previous_token_score(uniform).item()
    bound("layer 1's lowest induction score", induction[1].min().item(), at_least=0.6)  # both layer-1 heads
    bound("5 × chance induction score", 5 * chance_induction, at_most=0.6)
    bound("layer 0's top previous-token score / chance", previous[0].max().item() / chance_previous, at_least=2)
    bound("layer 1's top previous-token score / chance", previous[1].max().item() / chance_previous, at_most=1)
    # layer 0 holds no induction head
    bound("layer 0's top induction score / chance", induction[0].max().item() / chance_induction, at_most=3)
    first_half = previous_token_score(attention_patterns(model, tokens)[0, :, :, :10, :10])  # layer 0, (heads,)
    bound("layer 0's top previous-token score on the first half / chance",
          first_half.max().item() / previous_token_score(uniform[:, :, :10, :10]).item(), at_least=1.8)
    assert divmod(int(induction.argmax()), recipe.num_heads)[0] == 1
    assert divmod(int(previous.argmax()), recipe.num_heads)[0] == 0


@pytest.mark.trained
def test_ablations_and_the_key_only_patch(trained):
    """The lesson's ablation and patching bounds: every head matters; in layer 1 a pooled mean hurts
    more than a per-position one and than zero, while zero and the per-position mean hurt alike (their gap is under a
    quarter of the latter's damage); after block 0 only position 4's stream, and in layer 1 only the key
    input at position 4, restores the corrupted prediction (over the cells a patch can reach)."""
    _, model, _, _, tokens = trained
    with torch.no_grad():
        intact = half_losses(model(tokens), tokens)[1].item()
    pooled, per_position = head_output_means(model, tokens), head_output_means(model, tokens, per_position=True)
    for layer, head in [(0, 0), (0, 1), (1, 0), (1, 1)]:
        with ablate_heads(model, [(layer, head)], "mean", per_position), torch.no_grad():
            kept = half_losses(model(tokens), tokens)[1].item()
        with ablate_heads(model, [(layer, head)], "mean", pooled), torch.no_grad():
            mixed = half_losses(model(tokens), tokens)[1].item()
        with ablate_heads(model, [(layer, head)], "zero"), torch.no_grad():
            zeroed = half_losses(model(tokens), tokens)[1].item()
        bound(f"head {layer}.{head} mean-ablated: loss rise", kept - intact, at_least=0.2)
        if layer == 1:
            bound(f"head {layer}.{head}: pooled minus per-position mean's loss", mixed - kept, at_least=0.1)
            bound(f"head {layer}.{head}: pooled mean's minus zero's loss", mixed - zeroed, at_least=0.2)
            # what zero removes beyond the per-position mean (the head's usual output) is small beside what both remove
            bound(f"head {layer}.{head}: |zero's minus per-position mean's loss| / the latter's rise",
                  abs(zeroed - kept) / (kept - intact), at_most=0.25)
    clean = tokens[(tokens[:, :10] == tokens[:, 3:4]).sum(dim=1) == 1][:80]
    corrupted = clean.clone()
    corrupted[:, 3] = (clean[:, 3] + 1) % 64
    target = clean[:, 14]
    with torch.no_grad():
        ends = [torch.log_softmax(model(t)[:, 13], -1).gather(-1, target[:, None]).mean() for t in (clean, corrupted)]
    bound("clean minus corrupted log-probability", (ends[0] - ends[1]).item(), at_least=2.0)
    stream = (trace_residual(model, clean, corrupted, 13, target) - ends[1]) / (ends[0] - ends[1])  # (layers + 1, T)
    others = residual_patch_reach(clean, corrupted, 13, 2)[1]
    bound("after block 0, position 4: share restored", stream[1, 4].item(), at_least=0.8)
    others[4] = False
    bound("after block 0, other reachable positions: most restored", stream[1][others].max().item(), at_most=0.2)
    restored = (trace_projections(model, clean, corrupted, 1, 13, target) - ends[1]) / (ends[0] - ends[1])  # (3, T)
    reach = projection_patch_reach(clean, corrupted, 1, 13, 2)  # (3, T)
    bound("key input at position 4: share restored", restored[1, 4].item(), at_least=0.8)
    reach[1, 4] = False
    bound("other reachable key inputs: most restored", restored[1][reach[1]].max().item(), at_most=0.2)
    bound("query input: most restored where reachable", restored[0][reach[0]].max().item(), at_most=0.2)
    bound("value input: most restored where reachable", restored[2][reach[2]].max().item(), at_most=0.2)


def test_a_patch_outside_its_reach_restores_exactly_nothing():
    """The grey cells of the lesson's patching maps: where the two runs do not differ, or where the place cannot reach
    the predicting position, a patch leaves the corrupted log-probability as it was, on an untrained model too; the
    reachable cells are the ones the construction allows and no more."""
    set_seed(0)
    model = GPT(GPTConfig(vocab_size=12, block_size=10, d_model=16, num_heads=2, num_layers=2, feed_forward=False))
    model = model.double().eval()
    clean = torch.randint(12, (4, 10), generator=torch.Generator().manual_seed(0))
    corrupted = clean.clone()
    corrupted[:, 3] = (clean[:, 3] + 1) % 12
    target = clean[:, 8]
    with torch.no_grad():
        untouched = torch.log_softmax(model(corrupted)[:, 7], -1).gather(-1, target[:, None]).mean()
    for trace, reach in (
        (trace_residual(model, clean, corrupted, 7, target), residual_patch_reach(clean, corrupted, 7, 2)),
        (trace_projections(model, clean, corrupted, 1, 7, target), projection_patch_reach(clean, corrupted, 1, 7, 2)),
    ):
        torch.testing.assert_close(trace[~reach], untouched.expand(int((~reach).sum())))
        assert (trace[reach] - untouched).abs().min() > 1e-9  # every reachable cell moves it (generic weights)
    assert residual_patch_reach(clean, corrupted, 7, 2).sum(1).tolist() == [1, 5, 1]  # 3; 3 … 7; 7
    assert projection_patch_reach(clean, corrupted, 1, 7, 2).sum(1).tolist() == [1, 5, 5]  # query at 7; 3 … 7
    assert projection_patch_reach(clean, corrupted, 0, 7, 2).sum(1).tolist() == [1, 1, 1]  # only 3 differs before
    with pytest.raises(ValueError, match="same tokens"):
        residual_patch_reach(clean, clean, 7, 2)


@pytest.mark.trained
@asserted_by("Lesson 13")
def test_the_induction_score_rises_fastest_in_the_window_in_which_the_loss_drops(trained):
    """The lesson's phase change: the repeated half's loss falls from 2.5 to 1.0 nats more than
    twice as fast per step as it fell before (a straight line fails this); layer 1's top induction score makes its
    largest rise inside that window; layer 0's top previous-token score is within 0.1 of chance just before the
    window and above twice chance just after it."""
    recipe, _, history, _, _ = trained
    drop_start = phase_change_step(history.repeated_half, 2.5)
    drop_end = phase_change_step(history.repeated_half, 1.0)
    before, during = fall_per_step(history.repeated_half, 2.5, 1.0)
    bound("loss fall per step during / before the drop", during / before, at_least=2)
    steps, induction = history.score_steps, history.last_layer_induction
    assert steps == list(range(0, recipe.steps + 1, recipe.score_every))
    gains = [induction[k + 1] - induction[k] for k in range(len(steps) - 1)]
    largest_rise = steps[1 + gains.index(max(gains))]
    bound("step of the largest induction rise after the drop's start", largest_rise - drop_start, at_least=1)
    bound("step of the largest induction rise before the drop's end + a scoring interval",
          drop_end + recipe.score_every - largest_rise, at_least=1)
    probe = probe_batch(recipe, seed=0)
    chance = previous_token_score(uniform_attention(probe.shape[1])[None, None]).item()
    previous = history.layer_0_previous
    bound("previous-token score minus chance before the window", previous[drop_start // recipe.score_every] - chance,
          at_most=0.1)
    bound("previous-token score / chance after the window", previous[drop_end // recipe.score_every + 1] / chance,
          at_least=2)


def test_fall_per_step_tells_a_line_from_a_plateau_and_a_drop():
    line = [4.25 - 0.0086 * step for step in range(600)]  # the reviewer's straight line: 4.25 … 2.5 … 1.0
    before, during = fall_per_step(line, 2.5, 1.0, window=1)
    assert abs(during / before - 1) < 0.05
    plateau_then_drop = [4.0] * 300 + [4.0 - 0.05 * step for step in range(1, 80)] + [0.05] * 100
    before, during = fall_per_step(plateau_then_drop, 2.5, 1.0, window=1)
    assert during > 3 * before
    assert fall_per_step([4.0] * 50, 2.5, 1.0) is None


@pytest.mark.trained
def test_one_layer_cannot_copy(trained):
    """The control: the same recipe and steps with one layer leaves the repeated half's loss far above
    the two-layer model's, no better than spreading the bet over the distinct tokens seen so far."""
    _, model, _, control, tokens = trained
    with torch.no_grad():
        two_layers = half_losses(model(tokens), tokens)[1].item()
        one_layer = half_losses(control(tokens), tokens)[1].item()
    distinct = (~earlier_occurrences(tokens).any(-1)).cumsum(-1)  # (batch, T): distinct tokens among 0 … i
    seen_so_far = distinct[:, 10:-1].double().log().mean().item()
    bound("one layer's minus two layers' loss", one_layer - two_layers, at_least=1.5)
    bound("one layer's loss minus the distinct tokens' uniform bet", one_layer - seen_so_far, at_least=-0.3)
