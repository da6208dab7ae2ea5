"""Lesson 06's experiment: a task of two relations at once (the previous position's value, and the value under the
key a query names), which two heads of width d_model/2 learn and one head of width d_model does not."""

import pytest
import torch

from bounds import bound, bound_seeds
from transformer_lib.two_relations import (
    TwoRelationsHistory,
    TwoRelationsModel,
    TwoRelationsTask,
    head_roles,
    train_two_relations,
    two_relations_batch,
    two_relations_loss,
)


def test_a_batch_asks_for_the_previous_value_and_the_value_under_the_named_key():
    task = TwoRelationsTask(length=6, num_keys=9, num_values=5)
    batch = two_relations_batch(task, 200, torch.Generator().manual_seed(0))
    assert all(len(set(row)) == task.length for row in batch.keys.tolist())  # every key once per sequence
    assert torch.equal(batch.previous[:, 1:], batch.values[:, :-1]) and torch.all(batch.previous[:, 0] == -1)
    named = (batch.queries[:, :, None] == batch.keys[:, None, :]).int().argmax(-1)  # (batch, T): the key's position
    assert torch.equal(named, batch.partner) and torch.equal(batch.values.gather(1, named), batch.match)
    positions = torch.arange(task.length)
    assert not torch.any(named == positions) and not torch.any(named == (positions - 1) % task.length)
    assert len(set(named.flatten().tolist())) == task.length  # every position is named somewhere


@pytest.mark.parametrize("sizes", [dict(length=2), dict(length=8, num_keys=7), dict(num_values=1)])
def test_sizes_that_leave_no_task_are_clear_errors(sizes):
    with pytest.raises(ValueError, match="TwoRelationsTask"):
        TwoRelationsTask(**sizes)


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((3,)))
def test_two_heads_learn_both_relations_where_one_head_of_twice_the_width_cannot(seed):
    one_model, one = train_two_relations(num_heads=1, seed=seed)
    two_model, two = train_two_relations(num_heads=2, seed=seed)
    assert sum(p.numel() for p in one_model.parameters()) == sum(p.numel() for p in two_model.parameters())
    bound("two heads: both relations right", two.both[-1], at_least=0.95)  # the bounds lesson 06 asserts
    bound("one head: both relations right", one.both[-1], at_most=0.3)
    bound("one head: previous value right", one.previous[-1], at_least=0.9)
    held_out = two_relations_batch(TwoRelationsTask(), 1000, torch.Generator().manual_seed(10_000 + seed))
    roles = head_roles(two_model, held_out)  # per head: share of positions peaking on each relation's position
    on_previous = max(range(2), key=lambda head: roles["previous"][head])
    bound("two heads: one head's largest weight on the previous position", roles["previous"][on_previous],
          at_least=0.9)  # the split lesson 06 asserts
    bound("two heads: the other head's on the named key", roles["match"][1 - on_previous], at_least=0.9)
    bound("one head: its largest weight on the previous position", head_roles(one_model, held_out)["previous"][0],
          at_least=0.9)


def test_the_loss_of_both_relations_is_the_sum_of_each_alone():
    task = TwoRelationsTask()
    batch = two_relations_batch(task, 16, torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    model = TwoRelationsModel(task, d_model=16, num_heads=2)
    previous_logits, match_logits = model(batch)  # (batch, T, V) each
    match_alone = two_relations_loss(model, batch, ("match",))
    torch.testing.assert_close(match_alone, torch.nn.functional.cross_entropy(match_logits.flatten(0, 1),
                                                                              batch.match.flatten()))
    torch.testing.assert_close(two_relations_loss(model, batch),
                               two_relations_loss(model, batch, ("previous",)) + match_alone)


@pytest.mark.parametrize("relations", [(), ("match", "match"), ("next",)])
def test_relations_other_than_previous_and_match_are_clear_errors(relations):
    with pytest.raises(ValueError, match="name one or both of"):
        train_two_relations(num_heads=1, steps=1, relations=relations)


@pytest.mark.trained
@pytest.mark.parametrize("seed", bound_seeds((3,)))
def test_one_wide_head_learns_the_relation_by_content_alone(seed):
    """Lesson 06's control: the one head that fails on two relations learns the named-key relation on its own."""
    _, alone = train_two_relations(num_heads=1, seed=seed, relations=("match",))
    bound("one head, named-key relation alone: value right", alone.match[-1], at_least=0.95)


def test_the_plot_draws_one_line_per_run_with_labels():
    import matplotlib

    matplotlib.use("Agg")
    from transformer_lib.views.multi_head_attention import plot_two_relations

    history = TwoRelationsHistory(steps=[50, 100], both=[0.2, 0.6])
    ax = plot_two_relations({"one head": [history, history], "two heads": [history]}, "runs")
    assert len(ax.lines) == 3 and ax.get_title() == "runs" and ax.get_ylabel()
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["one head", "two heads"]
