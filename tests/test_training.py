"""Training pieces: teacher forcing, the padded and smoothed loss, the schedules, a short run, checkpoints; and
lesson 11's GPT trained on next-character prediction."""

import math

import pytest
import torch
import torch.nn.functional as F

from bounds import asserted_by, bound, bound_seeds
from course_tools import CHECKPOINTS_VARIABLE
from transformer_lib.checkpoints import CHECKPOINTS_VARIABLE as LIBRARY_CHECKPOINTS_VARIABLE
from transformer_lib.checkpoints import lesson_checkpoint, load_checkpoint, save_checkpoint
from transformer_lib.data import (
    ADJECTIVES,
    NOUNS,
    VERBS,
    CharTokenizer,
    make_translation_task,
    train_valid_split,
    zen_of_python,
)
from transformer_lib.evaluation import bleu, chrf, translate
from transformer_lib.gpt import GPT, GPTConfig
from transformer_lib.masks import padding_mask
from transformer_lib.model import Transformer, cross_attention_weights
from transformer_lib.recipes import train_translation_model, translation_model_config
from transformer_lib.training import (
    LMHistory,
    LMTrainingState,
    TrainingConfig,
    evaluate_loss,
    label_smoothed_cross_entropy,
    shift_for_teacher_forcing,
    train,
    train_gpt,
    training_step,
    transformer_lr,
    unigram_loss,
    warmup_linear_decay_lr,
    warmup_run,
    warmup_task,
)


def test_teacher_forcing_shifts_by_one():
    tgt = torch.tensor([[1, 7, 8, 2, 0]])
    decoder_input, labels = shift_for_teacher_forcing(tgt)
    assert decoder_input.tolist() == [[1, 7, 8, 2]] and labels.tolist() == [[7, 8, 2, 0]]


def test_loss_equals_pytorch_and_ignores_padding():
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 6, dtype=torch.float64)
    labels = torch.tensor([[3, 4, 2, 0], [5, 2, 0, 0]])
    expected = F.cross_entropy(logits.reshape(-1, 6), labels.reshape(-1), ignore_index=0)
    torch.testing.assert_close(label_smoothed_cross_entropy(logits, labels, 0), expected)
    changed = logits.clone()
    changed[1, 3] = 100.0  # a padding position: must not matter
    torch.testing.assert_close(label_smoothed_cross_entropy(changed, labels, 0, 0.1),
                               label_smoothed_cross_entropy(logits, labels, 0, 0.1))


def test_smoothing_spreads_its_mass_over_every_token_but_pad():
    torch.manual_seed(1)
    logits = torch.randn(2, 3, 5, dtype=torch.float64)
    labels = torch.tensor([[3, 4, 0], [1, 2, 3]])
    target = torch.full((2, 3, 5), 0.1 / 4, dtype=torch.float64)  # 0.1 over the 4 tokens other than <pad> = 0
    target[..., 0] = 0.0
    target.scatter_add_(-1, labels.unsqueeze(-1), torch.full((2, 3, 1), 0.9, dtype=torch.float64))
    per_token = -(target * logits.log_softmax(-1)).sum(-1)  # (2, 3)
    real = labels != 0
    torch.testing.assert_close(label_smoothed_cross_entropy(logits, labels, 0, 0.1), per_token[real].mean())
    over_all_tokens = F.cross_entropy(logits.reshape(-1, 5), labels.reshape(-1), ignore_index=0, label_smoothing=0.1)
    assert not torch.isclose(label_smoothed_cross_entropy(logits, labels, 0, 0.1), over_all_tokens)


def test_loss_has_no_nan_with_infinite_logits_or_only_padding():
    logits = torch.zeros(1, 3, 5)
    logits[0, 2] = float("-inf")  # a padding position with -inf everywhere: its log-probabilities are NaN
    labels = torch.tensor([[3, 2, 0]])
    loss = label_smoothed_cross_entropy(logits, labels, pad_id=0, smoothing=0.1)
    torch.testing.assert_close(loss, label_smoothed_cross_entropy(logits[:, :2], labels[:, :2], 0, 0.1))
    assert not torch.isnan(label_smoothed_cross_entropy(torch.zeros(1, 2, 5), torch.zeros(1, 2, dtype=torch.long), 0))


def test_a_training_step_is_shift_forward_smoothed_loss_backward_clip_step():
    task = make_translation_task(num_train=32, num_valid=8, num_test=4, num_unseen=4, seed=0)
    src, tgt = task.encode_pairs(task.train[:16])
    models = []
    for _ in range(2):
        torch.manual_seed(0)
        models.append(Transformer(translation_model_config(task)))
    by_hand, library = models
    optimizers = [torch.optim.Adam(m.parameters(), lr=1e-3) for m in models]
    logits = by_hand(src, tgt[:, :-1], src_mask=(src != 0)[:, None, None, :])
    loss = label_smoothed_cross_entropy(logits, tgt[:, 1:], 0, 0.1)
    optimizers[0].zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(by_hand.parameters(), 0.5)
    optimizers[0].step()
    smoothed, cross_entropy = training_step(library, optimizers[1], src, tgt, 0, smoothing=0.1, clip_norm=0.5)
    plain = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=0)
    # The library's own cross-entropy against PyTorch's: two float32 means of ~100 terms near 4.5, summed in other
    # orders, so a tolerance; the loss and the weights come from the same operations run twice, so exact.
    assert smoothed == loss.item() and math.isclose(cross_entropy, plain.item(), rel_tol=1e-4)
    for a, b in zip(by_hand.parameters(), library.parameters(), strict=True):
        assert torch.equal(a, b)


def test_chrf_on_a_hand_computed_example():
    # "ab" against "abc", n = 1, 2: precisions 2/2 and 1/1, recalls 2/3 and 1/2 -> P = 1, R = 7/12
    assert math.isclose(chrf([["ab"]], [["abc"]], max_n=2, beta=1.0), 100 * 14 / 19)
    assert math.isclose(chrf([["ab"]], [["abc"]], max_n=2), 100 * 7 / 11)  # beta 2: 5 P R / (4 P + R)
    assert chrf([["a", "b"]], [["ab"]]) == 100.0  # spaces do not count
    assert math.isclose(chrf([["aaa"]], [["a"]], max_n=1, beta=1.0), 100 * 2 * (1 / 3) / (1 / 3 + 1))  # clipped
    assert chrf([["x"]], [["y"]]) == 0.0
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        chrf([["a"], ["b"]], [["a"]])


def test_the_unseen_split_holds_the_two_adjective_phrases_the_others_never_show():
    task = make_translation_task(num_train=200, num_valid=20, num_test=20, num_unseen=30, seed=0)
    adjectives = set(ADJECTIVES)

    def most_adjectives_in_a_row(words):
        runs, run = [0], 0
        for word in words:
            run = run + 1 if word in adjectives else 0
            runs.append(run)
        return max(runs)

    assert len(task.unseen) == 30 and all(most_adjectives_in_a_row(s) == 2 for s, _ in task.unseen)
    assert all(most_adjectives_in_a_row(s) <= 1 for split in (task.train, task.valid, task.test) for s, _ in split)
    with pytest.raises(ValueError, match="num_unseen=5 needs phrases with more than seen_adjectives=2"):
        make_translation_task(10, 2, 2, num_unseen=5, seen_adjectives=2)


def test_paper_schedule_warms_up_then_decays():
    lrs = [transformer_lr(s, d_model=512, warmup_steps=4000) for s in (1, 2000, 4000, 16000)]
    assert math.isclose(lrs[2], 512**-0.5 * 4000**-0.5)
    assert math.isclose(lrs[1], lrs[2] / 2) and math.isclose(lrs[3], lrs[2] / 2)
    assert lrs[0] < lrs[1]


def test_linear_schedule_peaks_and_ends_at_zero():
    assert warmup_linear_decay_lr(50, 1e-3, 100, 1000) == 5e-4
    assert warmup_linear_decay_lr(100, 1e-3, 100, 1000) == 1e-3
    assert warmup_linear_decay_lr(1000, 1e-3, 100, 1000) == 0.0


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((0,)))
def test_a_short_run_lowers_the_loss_and_a_checkpoint_restores_it(tmp_path, seed):
    task = make_translation_task(num_train=512, num_valid=64, num_test=8, seed=0)
    torch.manual_seed(seed)
    model = Transformer(translation_model_config(task))
    before = evaluate_loss(model, task)
    history = train(model, task, TrainingConfig(steps=60, warmup_steps=10, batch_size=32, seed=seed), progress=False)
    after = evaluate_loss(model, task)
    bound("validation loss after / before", after / before, at_most=0.7)
    assert history.valid_loss[-1] == after and len(history.train_loss) == 60
    save_checkpoint(model, tmp_path / "model.pt")
    restored = load_checkpoint(tmp_path / "model.pt")
    assert evaluate_loss(restored, task) == after


def test_the_same_seed_trains_the_same_model():
    task = make_translation_task(num_train=128, num_valid=16, num_test=4, seed=0)
    losses = []
    for _ in range(2):
        torch.manual_seed(0)
        model = Transformer(translation_model_config(task))
        history = train(model, task, TrainingConfig(steps=8, warmup_steps=2, batch_size=16), progress=False)
        losses.append(history.train_loss)
    assert losses[0] == losses[1]


def test_lesson_checkpoints_live_in_the_folder_the_course_tools_choose(monkeypatch, tmp_path):
    """The test command and `execute` set the folder by the variable course_tools names; the library reads it."""
    assert LIBRARY_CHECKPOINTS_VARIABLE == CHECKPOINTS_VARIABLE
    monkeypatch.delenv(CHECKPOINTS_VARIABLE, raising=False)
    assert lesson_checkpoint("translation").as_posix() == "../checkpoints/translation.pt"
    monkeypatch.setenv(CHECKPOINTS_VARIABLE, str(tmp_path))
    assert lesson_checkpoint("translation") == tmp_path / "translation.pt"


def test_steps_equal_to_the_default_warm_up_are_refused_with_a_suggestion():
    with pytest.raises(ValueError, match=r"warmup_steps=100 must be at least 0 and less than steps=100: .* "
                                         r"TrainingConfig\(steps=100, warmup_steps=25\)"):
        TrainingConfig(steps=100)
    TrainingConfig(steps=101)  # the default warm-up of 100 fits
    TrainingConfig(steps=10, warmup_steps=0)  # no warm-up at all


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(steps=0, warmup_steps=0), "steps=0 must be at least 1: the number of optimiser steps"),
        (dict(warmup_steps=-1), "warmup_steps=-1 must be at least 0"),
        (dict(batch_size=0), "batch_size=0 must be at least 1: the number of sentence pairs"),
        (dict(peak_lr=0.0), "peak_lr=0.0 must be > 0"),
        (dict(clip_norm=-1.0), "clip_norm=-1.0 must be > 0: .* 1e9 to turn clipping off"),
        (dict(label_smoothing=1.0), r"label_smoothing=1.0 must be in \[0, 1\)"),
    ],
)
def test_impossible_training_configs_are_clear_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        TrainingConfig(**overrides)


def test_linear_schedule_at_and_past_the_end_of_the_budget():
    assert warmup_linear_decay_lr(400, 1e-3, 100, 400) == 0.0
    assert warmup_linear_decay_lr(401, 1e-3, 100, 400) == 0.0  # LambdaLR asks for the step after the last
    assert warmup_linear_decay_lr(100, 1e-3, 100, 100) == 1e-3  # a warm-up filling the budget: no 0/0 either
    assert warmup_linear_decay_lr(101, 1e-3, 100, 100) == 0.0


def test_a_run_whose_warm_up_ends_one_step_before_the_budget_trains_to_the_end():
    task = make_translation_task(num_train=64, num_valid=16, num_test=4, seed=0)
    torch.manual_seed(0)
    history = train(Transformer(translation_model_config(task)), task,
                    TrainingConfig(steps=3, warmup_steps=2, batch_size=16), progress=False)
    assert history.steps == [1, 2, 3] and history.lr[1] == TrainingConfig().peak_lr
    assert len(history.train_cross_entropy) == 3


def test_paper_schedule_refuses_a_zero_warm_up():
    with pytest.raises(ValueError, match="warmup_steps=0 must both be at least 1 .* warmup_steps=4000"):
        transformer_lr(1, d_model=512, warmup_steps=0)


@pytest.mark.parametrize(
    "logits_shape, labels, error, message",
    [
        ((2, 4, 6), torch.zeros(3, 4, dtype=torch.long), ValueError, r"logits \(2, 4, 6\) and labels \(3, 4\)"),
        ((2, 4), torch.zeros(2, 4, dtype=torch.long), ValueError, r"logits must be \(batch, T, V\)"),
        ((1, 2, 6), torch.tensor([[3, 6]]), ValueError, "token id 6 in labels is outside the vocabulary of 6"),
        ((1, 2, 6), torch.tensor([[3.0, 1.0]]), TypeError, r"labels must hold integer token ids"),
    ],
)
def test_loss_inputs_that_do_not_fit_are_clear_errors(logits_shape, labels, error, message):
    with pytest.raises(error, match=message):
        label_smoothed_cross_entropy(torch.zeros(logits_shape), labels, pad_id=0)


def test_loss_refuses_smoothing_outside_zero_to_one():
    with pytest.raises(ValueError, match=r"smoothing=1.0 must be in \[0, 1\)"):
        label_smoothed_cross_entropy(torch.zeros(1, 2, 6), torch.tensor([[3, 1]]), pad_id=0, smoothing=1.0)


def test_teacher_forcing_needs_two_tokens_per_target():
    with pytest.raises(ValueError, match=r"T >= 2 .* got shape \(2, 1\): encode each target with add_bos=True"):
        shift_for_teacher_forcing(torch.ones(2, 1, dtype=torch.long))


def _small_gpt(vocab_size: int, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size, block_size=16, d_model=32, num_heads=2, num_layers=2, d_ff=64))


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((0,)))
def test_training_lowers_the_loss_is_repeatable_and_measures_both_splits(seed):
    tokenizer = CharTokenizer(zen_of_python())
    train, valid = train_valid_split(tokenizer.encode(zen_of_python()), 0.2)
    runs = [train_gpt(_small_gpt(len(tokenizer), seed), train, 60, valid, batch_size=16, lr=3e-3, eval_every=20,
                      eval_windows=4, seed=seed) for _ in range(2)]
    assert runs[0].step_loss == runs[1].step_loss
    assert runs[0].eval_steps == [0, 20, 40, 60] and len(runs[0].valid_loss) == len(runs[0].train_loss) == 4
    bound("training loss last / first", runs[0].train_loss[-1] / runs[0].train_loss[0], at_most=0.8)


@pytest.mark.parametrize("stop", [20, 30])  # on the grid of measurements, and between two of them
def test_a_run_stopped_and_continued_equals_the_run_that_never_stopped(stop):
    """Same machine, same setting, the same computations in the same order: equal to the last bit."""
    tokenizer = CharTokenizer(zen_of_python())
    train, valid = train_valid_split(tokenizer.encode(zen_of_python()), 0.2)
    settings = {"valid": valid, "batch_size": 8, "lr": 3e-3, "eval_every": 20, "eval_windows": 4, "seed": 3}
    whole_model = _small_gpt(len(tokenizer))
    whole = train_gpt(whole_model, train, 50, **settings)
    parted_model, state = _small_gpt(len(tokenizer)), LMTrainingState()
    train_gpt(parted_model, train, stop, state=state, **settings)
    assert state.step == stop
    parted = train_gpt(parted_model, train, 50, state=state, **settings)
    assert parted.eval_steps == whole.eval_steps == [0, 20, 40, 50]
    assert (parted.step_loss, parted.train_loss, parted.valid_loss) == (whole.step_loss, whole.train_loss,
                                                                        whole.valid_loss)
    for name, tensor in whole_model.state_dict().items():
        assert torch.equal(parted_model.state_dict()[name], tensor), name


def test_a_run_cannot_go_on_to_fewer_steps_than_it_took():
    tokenizer = CharTokenizer(zen_of_python())
    with pytest.raises(ValueError, match=r"already took 5 steps, more than steps=3: pass steps >= 5"):
        train_gpt(_small_gpt(len(tokenizer)), tokenizer.encode(zen_of_python()), 3, state=LMTrainingState(step=5))


def test_train_gpt_needs_more_data_than_one_block():
    with pytest.raises(ValueError, match=r"N > block_size=16 .* got shape \(16,\): pass a longer text"):
        train_gpt(_small_gpt(10), torch.zeros(16, dtype=torch.long), steps=1)


def test_the_best_step_is_where_the_held_out_loss_is_lowest():
    history = LMHistory(eval_steps=[0, 100, 200], train_loss=[3.0, 2.0, 1.0], valid_loss=[3.1, 2.2, 2.4])
    assert history.best_step() == 100
    with pytest.raises(ValueError, match="no held-out loss was measured"):
        LMHistory().best_step()


@pytest.mark.trained
@asserted_by("Lesson 09")
@pytest.mark.parametrize("seed", bound_seeds((0,)))  # the lesson's seed: its runs load from the cache
def test_without_positions_the_loss_stays_above_twice_the_same_schedules_with_them(seed):
    """Lesson 09's comparison at matched schedules: both runs take the same 150 steps, seed, weights and batches;
    the model with positions also scores higher over the test set, by the margins lesson 09 asserts."""
    config, cpu = TrainingConfig(steps=150, warmup_steps=40, seed=seed), torch.device("cpu")
    with_run = train_translation_model(config, cpu, progress=False)
    with_positions = with_run.history
    without = train_translation_model(config, cpu, progress=False, positions=False)
    assert not without.model.positions.any() and with_positions.valid_steps[-1] == without.history.valid_steps[-1]
    bound("validation loss without / with positions", without.history.valid_loss[-1] / with_positions.valid_loss[-1],
          at_least=2.0)
    task = make_translation_task(seed=seed)  # the recipe's task for this seed
    references = [t for _, t in task.test]
    scores = []
    for model in (with_run.model, without.model):
        predictions = translate(model, task, [s for s, _ in task.test])
        exact = sum(p == t for p, t in zip(predictions, references, strict=True)) / len(references)
        scores.append((exact, bleu(predictions, references), chrf(predictions, references)))
    margins = (0.30, 20, 10)  # exact match (a fraction), BLEU, chrF: measured gaps 0.61-0.64, 43-45, 19-20
    for name, w, wo, m in zip(("exact match", "BLEU", "chrF"), *scores, margins, strict=True):
        bound(f"{name} with minus without positions", w - wo, at_least=m)


@pytest.mark.trained
@asserted_by("Lesson 09")
@pytest.mark.parametrize("seed", bound_seeds((0,)))  # the lesson's seed: its run loads from the cache
def test_lesson_09s_run_learns_the_task_and_not_the_unseen_kind(seed):
    """Lesson 09's 400-step run, with the bounds the lesson asserts on seed 0: the validation loss, the test split's
    exact match, BLEU and chrF, the unseen two-adjective split's failure (its chrF still far above a wrong sentence's),
    and no layer whose mean attention is an alignment of the verb."""
    run = train_translation_model(TrainingConfig(seed=seed), torch.device("cpu"), progress=False)
    model, task, history = run.model.eval(), run.task, run.history
    bound("validation loss at the end", history.valid_loss[-1], at_most=0.3)
    bound("validation loss, last / first measurement", history.valid_loss[-1] / history.valid_loss[0], at_most=0.2)
    scores = {}
    for split in ("test", "unseen"):
        pairs = getattr(task, split)
        references = [t for _, t in pairs]
        predictions = translate(model, task, [s for s, _ in pairs])
        exact = sum(p == t for p, t in zip(predictions, references, strict=True)) / len(pairs)
        scores[split] = exact, bleu(predictions, references), chrf(predictions, references)
    (exact, test_bleu, test_chrf), (unseen_exact, unseen_bleu, unseen_chrf) = scores["test"], scores["unseen"]
    bound("test exact match", exact, at_least=0.99)
    bound("test BLEU", test_bleu, at_least=95)
    bound("test chrF", test_chrf, at_least=99)
    bound("unseen exact match", unseen_exact, at_most=0.10)
    bound("unseen chrF", unseen_chrf, at_least=50)
    bound("test minus unseen chrF", test_chrf - unseen_chrf, at_least=10)
    bound("unseen chrF minus BLEU", unseen_chrf - unseen_bleu, at_least=10)
    unseen_references = [t for _, t in task.unseen]
    wrong_sentence = chrf(unseen_references[1:] + unseen_references[:1], unseen_references)  # each its neighbour's
    bound("unseen chrF minus a wrong sentence's (the next reference's)", unseen_chrf - wrong_sentence, at_least=45)
    source_verbs = {form for singular, (plural, *_) in VERBS.items() for form in (singular, plural)}
    src, tgt = task.encode_pairs(task.test)  # (N, S), (N, T)
    decoder_input, _ = shift_for_teacher_forcing(tgt)
    maps = cross_attention_weights(model, src, decoder_input, src_mask=padding_mask(src, task.src_vocab.pad_id))
    verb_row = torch.tensor([len(t) - 1 for _, t in task.test])  # the position that predicts the verb
    verb_column = torch.tensor([next(i for i, w in enumerate(s) if w in source_verbs) for s, _ in task.test])
    sentences = torch.arange(len(task.test))
    on_verb = []  # per layer, the share of sentences whose verb row peaks on the source verb: heads averaged, each head
    for weights in maps:  # weights: (N, heads, T, S)
        rows = weights[sentences, :, verb_row]  # (N, heads, S)
        on_verb += [(rows.mean(1).argmax(-1) == verb_column).float().mean().item(),
                    *(rows.argmax(-1) == verb_column[:, None]).float().mean(0).tolist()]
    bound("largest share of sentences a head or mean puts on the source verb", max(on_verb), at_least=0.3)


@pytest.mark.trained
@asserted_by("Lesson 06")
@pytest.mark.parametrize("seed", bound_seeds((0,)))  # the lesson's seed: its run loads from the cache
def test_lesson_06s_translator_has_a_head_that_looks_up_the_word_being_translated(seed):
    """Lesson 06's bound on the 150-step translator: in decoder layer 1's cross-attention, some head puts its largest
    weight on the source word being translated for at least half of the content words of 300 test sentences."""
    run = train_translation_model(TrainingConfig(steps=150, warmup_steps=40, seed=seed), torch.device("cpu"),
                                  progress=False)
    model, task = run.model.eval(), run.task
    to_source = {target: source for source, target in ADJECTIVES.items()}  # target word -> source word
    for singular, (plural, target_singular, target_plural, _) in NOUNS.items():
        to_source |= {target_singular: singular, target_plural: plural}
    for singular, (plural, target_singular, target_plural) in VERBS.items():
        to_source |= {target_singular: singular, target_plural: plural}
    pairs = task.test[:300]
    src, tgt = task.encode_pairs(pairs)
    decoder_input, _ = shift_for_teacher_forcing(tgt)  # row i predicts target word i
    cross = cross_attention_weights(model, src, decoder_input, src_mask=padding_mask(src, task.src_vocab.pad_id))[1]
    hits, words = torch.zeros(cross.shape[1]), 0  # per head
    for n, (source_words, target_words) in enumerate(pairs):
        for i, word in enumerate(target_words):
            if word in to_source and source_words.count(to_source[word]) == 1:
                hits += cross[n, :, i].argmax(dim=-1) == source_words.index(to_source[word])
                words += 1
    bound("best head's share of words looked up in the source", hits.max().item() / words, at_least=0.5)


def test_the_unigram_baseline_lies_between_a_perfect_model_and_a_uniform_guess():
    task = warmup_task()
    assert 0 < unigram_loss(task) < math.log(len(task.tgt_vocab))


@pytest.mark.trained
@asserted_by("Lesson 07")
@pytest.mark.parametrize("seed", bound_seeds((0,)))  # the lesson's seed: its runs load from the cache
def test_post_ln_needs_a_warm_up_pre_ln_does_not_and_it_helps_both(seed):
    """Lesson 07's four runs on one seed: post-LN or pre-LN, without or with a 60-step warm-up, at peak rate 0.01;
    `course.py bounds` trains seeds 0-4 in three CPU kernel settings (docs/bounds.md)."""
    task = warmup_task()
    unigram = unigram_loss(task)
    post, pre, post_warm, pre_warm = (warmup_run(norm_first, warmup, seed, task).valid_loss[-1]
                                      for norm_first, warmup in ((False, 1), (True, 1), (False, 60), (True, 60)))
    bound("post-LN loss / unigram's", post / unigram, at_least=0.75)  # the bounds lesson 07 asserts
    bound("pre-LN loss / unigram's", pre / unigram, at_most=0.35)
    bound("post-LN loss warmed / not", post_warm / post, at_most=0.85)
    bound("pre-LN minus warmed post-LN loss", pre - post_warm, at_most=0.0)
    bound("pre-LN loss warmed minus not", pre_warm - pre, at_most=0.0)
