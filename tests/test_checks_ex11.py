"""The lesson 11 checks accept the solutions, spot stubs, and name typical mistakes."""

import math

import numpy as np
import torch

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib.checks import ex11_gpt_and_scaling as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def mask(tokens, pad_id, causal=True, padding=True):
    length = tokens.shape[1]
    allowed = torch.ones(tokens.shape[0], 1, length, length, dtype=torch.bool)
    if causal:
        allowed = allowed & torch.ones(length, length, dtype=torch.bool).tril()
    if padding:
        allowed = allowed & (tokens != pad_id)[:, None, None, :]
    return allowed


def test_stubs_are_not_attempted(capsys):
    checks = (check.decoder_only_mask, check.baseline_predictions, check.cached_next_logits, check.stopping_step,
              check.scaling_fit)
    for check_fn in checks:
        assert not check_fn(stub).attempted
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == len(checks)


def test_decoder_only_mask_accepts_the_solution():
    assert check.decoder_only_mask(mask).ok


def test_decoder_only_mask_names_forgotten_padding_and_forgotten_causality():
    assert_rejected_with(check.decoder_only_mask(lambda t, p: mask(t, p, padding=False)), "hide the padding keys")
    assert_rejected_with(check.decoder_only_mask(lambda t, p: mask(t, p, causal=False)), "must not see the future")
    assert_rejected_with(check.decoder_only_mask(lambda t, p: ~mask(t, p)), "inverted")


def predictions(log=math.log, smoothing=1, bigram_divisor=3, vocabulary_in_denominator=True):
    """Training "ababababac" (a 5, b 4, c 1; pairs ab 4, ba 4, ac 1), held-out "abac"."""
    s = smoothing
    v = 3 * s if vocabulary_in_denominator else 0
    unigram = [(5 + s) / (10 + v), (4 + s) / (10 + v), (5 + s) / (10 + v), (1 + s) / (10 + v)]
    a_row, b_row = 5 + v, 4 + v  # pairs starting with a (ab 4, ac 1), with b (ba 4)
    bigram = [(4 + s) / a_row, (4 + s) / b_row, (1 + s) / a_row]
    return {
        "uniform": -log(1 / 3),
        "unigram": -sum(log(p) for p in unigram) / 4,
        "bigram": -sum(log(p) for p in bigram) / bigram_divisor,
    }


def test_baseline_predictions_accepts_the_hand_computation():
    assert check.baseline_predictions(predictions).ok


def test_baseline_predictions_names_bits_missing_smoothing_and_the_pair_count():
    assert_rejected_with(check.baseline_predictions(lambda: predictions(log=math.log2)), "not log2 (bits)")
    assert_rejected_with(check.baseline_predictions(lambda: predictions(smoothing=0)), "add one to every count")
    assert_rejected_with(check.baseline_predictions(lambda: predictions(bigram_divisor=4)), "divide by 3, not 4")
    assert_rejected_with(check.baseline_predictions(lambda: [1.1, 1.0, 0.9]), "returns a dict")


def cached(model, cache, tokens, feed="new", keep_dim=False, use_cache=True):
    new = {"new": tokens[:, len(cache):], "all": tokens, "last": tokens[:, -1:]}[feed]
    logits = model(new, cache=cache) if use_cache else model(tokens)
    return logits[:, -1:] if keep_dim else logits[:, -1]


def test_cached_next_logits_accepts_the_solution():
    assert check.cached_next_logits(cached).ok


def test_cached_next_logits_names_each_classic_bug():
    assert_rejected_with(check.cached_next_logits(lambda m, c, t: cached(m, c, t, feed="all")),
                         "feed only the tokens it has not seen")
    assert_rejected_with(check.cached_next_logits(lambda m, c, t: cached(m, c, t, feed="last")),
                         "on the first call the cache is empty")
    assert_rejected_with(check.cached_next_logits(lambda m, c, t: cached(m, c, t, keep_dim=True)),
                         "shaped (batch, V): [:, -1], not [:, -1:]")
    assert_rejected_with(check.cached_next_logits(lambda m, c, t: cached(m, c, t, use_cache=False)),
                         "call the model with cache=cache")


def best(steps, train_loss, valid_loss):
    return steps[valid_loss.index(min(valid_loss))]


def test_stopping_step_accepts_the_solution():
    assert check.stopping_step(best).ok


def test_stopping_step_names_the_training_loss_and_the_index():
    assert_rejected_with(check.stopping_step(lambda s, t, v: best(s, v, t)), "read the held-out loss")
    assert_rejected_with(check.stopping_step(lambda s, t, v: v.index(min(v))), "not the index i")


def fit(params, losses):
    slope, intercept = np.polyfit(np.log(params), np.log(losses), 1)
    return -slope, np.exp(intercept)


def test_scaling_fit_accepts_the_solution():
    assert check.scaling_fit(fit).ok


def test_scaling_fit_names_the_sign_the_axes_and_the_intercept():
    assert_rejected_with(check.scaling_fit(lambda n, l: (-fit(n, l)[0], fit(n, l)[1])), "alpha is minus the slope")
    linear = lambda n, l: (-np.polyfit(n, l, 1)[0], fit(n, l)[1])  # noqa: E731
    assert_rejected_with(check.scaling_fit(linear), "through the logarithms of both")
    swapped = lambda n, l: (-np.polyfit(np.log(l), np.log(n), 1)[0], fit(n, l)[1])  # noqa: E731
    assert_rejected_with(check.scaling_fit(swapped), "log N goes first")
    log_a = lambda n, l: (fit(n, l)[0], np.polyfit(np.log(n), np.log(l), 1)[1])  # noqa: E731
    assert_rejected_with(check.scaling_fit(log_a), "the intercept is log a")
    mixed = lambda n, l: (fit(n, l)[0], np.exp(np.polyfit(np.log10(n), np.log10(l), 1)[1]))  # noqa: E731
    assert_rejected_with(check.scaling_fit(mixed), "10**intercept after np.log10")


def test_scaling_fit_wants_two_numbers():
    assert_rejected_with(check.scaling_fit(lambda n, l: fit(n, l)[0]), "returns two numbers")


def test_every_named_mistake_is_diagnosed_as_itself():
    assert_diagnosed(check.decoder_only_mask(lambda t, p: mask(t, p, padding=False)), "padding-not-masked")
    assert_diagnosed(check.decoder_only_mask(lambda t, p: mask(t, p, causal=False)), "causal-mask-missing")
    assert_diagnosed(check.decoder_only_mask(lambda t, p: ~mask(t, p)), "mask-inverted")
    assert_diagnosed(check.decoder_only_mask(lambda t, p: torch.ones(4, 4, dtype=torch.bool).triu()
                                             & (t != p)[:, None, None, :]), "upper-triangle-kept")
    assert_diagnosed(check.decoder_only_mask(lambda t, p: torch.ones(4, 4, dtype=torch.bool).tril()
                                             & (t != p)[:, None, :, None]), "padding-on-queries")
    assert_diagnosed(check.baseline_predictions(lambda: predictions(log=math.log2)), "bits-not-nats")
    assert_diagnosed(check.baseline_predictions(lambda: predictions(smoothing=0)), "no-add-one-smoothing")
    assert_diagnosed(check.baseline_predictions(lambda: predictions(vocabulary_in_denominator=False)),
                     "smoothing-denominator-unchanged")
    assert_diagnosed(check.baseline_predictions(lambda: predictions(bigram_divisor=4)),
                     "averaged-over-characters-not-pairs")
    assert_diagnosed(check.cached_next_logits(lambda m, c, t: cached(m, c, t, feed="all")), "seen-tokens-fed-again")
    assert_diagnosed(check.cached_next_logits(lambda m, c, t: cached(m, c, t, keep_dim=True)), "position-axis-kept")
    assert_diagnosed(check.cached_next_logits(lambda m, c, t: cached(m, c, t, feed="last")), "prompt-not-fed")
    assert_diagnosed(check.cached_next_logits(lambda m, c, t: cached(m, c, t, use_cache=False)), "cache-not-passed")
    assert_diagnosed(check.stopping_step(lambda s, t, v: best(s, v, t)), "training-loss-read")
    assert_diagnosed(check.stopping_step(lambda s, t, v: v.index(min(v))), "index-not-step")
    assert_diagnosed(check.stopping_step(lambda s, t, v: min(v)), "loss-not-step")
    assert_diagnosed(check.stopping_step(lambda s, t, v: s[v.index(max(v))]), "argmax-not-argmin")
    assert_diagnosed(check.scaling_fit(lambda n, l: (-fit(n, l)[0], fit(n, l)[1])), "slope-sign-kept")
    assert_diagnosed(check.scaling_fit(lambda n, l: (-np.polyfit(n, l, 1)[0], fit(n, l)[1])), "fit-not-log-log")
    assert_diagnosed(check.scaling_fit(lambda n, l: (-np.polyfit(np.log(l), np.log(n), 1)[0], fit(n, l)[1])),
                     "axes-swapped")
    assert_diagnosed(check.scaling_fit(lambda n, l: (fit(n, l)[0], np.polyfit(np.log(n), np.log(l), 1)[1])),
                     "intercept-not-exponentiated")
    assert_diagnosed(check.scaling_fit(lambda n, l: (fit(n, l)[0], np.exp(np.polyfit(np.log10(n), np.log10(l), 1)[1]))),
                     "log-base-mismatch")


# --- answers right on the lesson's inputs only, right answers written another way, one hint per mistake


def _one_hint(result):
    """The check failed with exactly one diagnosis and printed its hint once; returns the result."""
    assert not result.ok and len(result.diagnoses) == 1, result.lines
    assert sum(line.startswith("  hint:") for line in result.lines) == 1, result.lines
    return result


def test_decoder_only_mask_uses_the_pad_id_passed_in():
    def pad_zero(tokens, pad_id):
        return torch.ones(tokens.shape[1], tokens.shape[1], dtype=torch.bool).tril() & (tokens != 0)[:, None, None]

    assert_diagnosed(_one_hint(check.decoder_only_mask(pad_zero)), "pad-id-hardcoded")

    def by_lengths(tokens, pad_id):  # right for padding at the end, from each row's length
        length = tokens.shape[1]
        real = torch.arange(length) < (tokens != pad_id).sum(1, keepdim=True)  # (batch, T)
        return (torch.arange(length)[:, None] >= torch.arange(length))[None, None] & real[:, None, None, :]

    assert check.decoder_only_mask(by_lengths).ok


def test_cached_next_logits_blames_only_the_tokens_fed_again():
    result = check.cached_next_logits(lambda model, cache, tokens: model(tokens, cache=cache)[:, -1])
    assert_diagnosed(_one_hint(result), "seen-tokens-fed-again")
    assert not any("call the model with cache=cache" in line for line in result.lines)


def test_stopping_step_reads_eval_steps_and_the_whole_run():
    def every_hundred(eval_steps, train_loss, valid_loss):
        return 100 * valid_loss.index(min(valid_loss))

    def first_rise(eval_steps, train_loss, valid_loss):
        rises = [i for i in range(len(valid_loss) - 1) if valid_loss[i + 1] > valid_loss[i]]
        return eval_steps[rises[0] if rises else -1]

    assert_diagnosed(_one_hint(check.stopping_step(every_hundred)), "step-interval-assumed")
    assert_diagnosed(_one_hint(check.stopping_step(first_rise)), "stopped-at-first-rise")
    assert check.stopping_step(lambda steps, train, valid: int(torch.tensor(steps)[torch.tensor(valid).argmin()])).ok


def test_scaling_fit_hints_once_for_a_wrong_line():
    def two_points(params, losses):
        slope = (math.log(losses[-1]) - math.log(losses[0])) / (math.log(params[-1]) - math.log(params[0]))
        return -slope, losses[0] * params[0] ** -slope

    assert _one_hint(check.scaling_fit(two_points)).diagnoses[0]["mistake"] == "other-wrong-answer"


def adamw_next(w, g, state, group, bug=None):
    """PyTorch's next AdamW step from its saved state, or with one classic mistake."""
    lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
    t = state["step"] + {"behind": 0, "ahead": 2}.get(bug, 1)
    if bug == "decay in moment":
        g = g + decay * w
    else:
        w = w * (1 - (decay if bug == "decay without lr" else lr * decay))
    m = beta1 * state["exp_avg"] + (1 - beta1) * g
    v = beta2 * state["exp_avg_sq"] + (1 - beta2) * g * g
    m_hat, v_hat = (m, v) if bug == "no correction" else (m / (1 - beta1**t), v / (1 - beta2**t))
    scale = (v_hat + eps).sqrt() if bug == "eps inside" else v_hat.sqrt() + eps
    stored = (m_hat, v_hat) if bug == "corrected stored" else (m, v)
    step = state["step"] + (0 if bug == "step kept" else 1)
    return w - lr * m_hat / scale, {"step": step, "exp_avg": stored[0], "exp_avg_sq": stored[1]}


def adamw_next_in_place(w, g, state, group):
    """Another correct way: in place, as torch.optim.AdamW does, the bias corrections folded into the step size."""
    (beta1, beta2), lr = group["betas"], group["lr"]
    state["step"] += 1
    t = state["step"]
    w.mul_(1 - lr * group["weight_decay"])
    state["exp_avg"].lerp_(g, 1 - beta1)
    state["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
    denominator = (state["exp_avg_sq"].sqrt() / math.sqrt(1 - beta2**t)).add_(group["eps"])
    w.addcdiv_(state["exp_avg"], denominator, value=-lr / (1 - beta1**t))
    return w, state


def test_adamw_next_step_accepts_correct_variants(capsys):
    assert check.adamw_next_step(adamw_next).ok
    assert check.adamw_next_step(adamw_next_in_place).ok
    assert not check.adamw_next_step(stub).attempted


def test_adamw_next_step_names_each_mistake(capsys):
    def with_bug(bug):
        return check.adamw_next_step(lambda *args: adamw_next(*args, bug=bug))

    assert_diagnosed(with_bug("decay in moment"), "decay-inside-moment")
    assert_diagnosed(with_bug("no correction"), "bias-correction-missing")
    assert_diagnosed(with_bug("behind"), "bias-correction-off-by-one")
    assert_diagnosed(with_bug("ahead"), "bias-correction-off-by-one")
    assert_diagnosed(with_bug("eps inside"), "eps-inside-sqrt")
    assert_diagnosed(with_bug("decay without lr"), "decay-without-lr")
    assert_diagnosed(with_bug("corrected stored"), "stored-corrected-moments")
    assert_diagnosed(with_bug("step kept"), "step-count-not-advanced")
    assert_rejected_with(check.adamw_next_step(lambda *args: adamw_next(*args)[0]), "returns (w, state)")


def resume(checkpoint, model, forget=()):
    """Resume from the checkpoint, or forget one of its parts."""
    if "weights" not in forget:
        model.load_state_dict(checkpoint["model"])
    optimizer = torch.optim.AdamW(model.parameters())  # load_state_dict restores the lr too
    if "optimizer" not in forget:
        optimizer.load_state_dict(checkpoint["optimizer"])
    generator = torch.Generator()
    if "generator" in forget:
        generator.manual_seed(3)  # the run's seed: the first batches again
    else:
        generator.set_state(checkpoint["generator"])
    return optimizer, generator, 0 if "step" in forget else checkpoint["step"]


def resume_other_way(checkpoint, model):
    """Another correct way: a new model's weights copied in, the lr given, the step as a tensor."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.copy_(checkpoint["model"][name])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    optimizer.load_state_dict(checkpoint["optimizer"])
    return optimizer, torch.Generator().set_state(checkpoint["generator"]), torch.tensor(checkpoint["step"])


def test_resume_accepts_correct_variants(capsys):
    assert check.resume(resume).ok
    assert check.resume(resume_other_way).ok
    assert not check.resume(stub).attempted


def test_resume_names_each_forgotten_part_and_shows_the_jump(capsys):
    result = check.resume(lambda c, m: resume(c, m, forget=("optimizer",)))
    assert_diagnosed(result, "forgot-optimizer-state")
    assert_rejected_with(result, "the first loss that differs is step 7")
    assert_diagnosed(check.resume(lambda c, m: resume(c, m, forget=("weights",))), "forgot-model-weights")
    assert_diagnosed(check.resume(lambda c, m: resume(c, m, forget=("generator",))), "forgot-batch-generator")
    result = check.resume(lambda c, m: resume(c, m, forget=("step",)))
    assert_diagnosed(result, "forgot-step-count")
    assert_rejected_with(result, "the resumed run took 10 steps")
    assert_rejected_with(check.resume(lambda c, m: resume(c, m)[:2]), "returns (optimizer, generator, step)")


def test_resume_leaves_the_global_generator_alone(capsys):
    torch.manual_seed(123)
    before = torch.get_rng_state()
    check.resume(resume)
    assert torch.equal(torch.get_rng_state(), before)
