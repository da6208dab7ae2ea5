"""The exercise feedback says where a result is wrong and counts its checks in good English."""

import torch

from transformer_lib.checks._feedback import Exercise, Hint, describe_mismatch, show_hint


def test_a_difference_beyond_the_printed_values_is_located():
    expected = torch.arange(12.0).reshape(3, 4)  # only the first 8 values are printed
    got = expected.clone()
    got[2, 1] = 99.0
    message = describe_mismatch(got, expected)
    assert message.endswith("; first difference at index (2, 1): expected 9, got 99"), message
    assert describe_mismatch(torch.tensor(3.0), torch.tensor(2.0)) == "expected 2, got 3"
    flags = describe_mismatch(torch.tensor([True, False]), torch.tensor([True, True]))
    assert flags.endswith("first difference at index 1: expected True, got False"), flags


def test_one_check_is_counted_in_the_singular(capsys):
    for value, summary in ((1.0, "Well done: the only check of demo passed."),
                           (2.0, "demo: 0 of 1 check passed.")):
        ex = Exercise("demo")
        with ex.run():
            ex.compare("one number", value, 1.0)
        assert summary in ex.result.lines[-1], ex.result.lines


def test_a_two_tier_hint_gives_the_idea_first_and_the_code_on_a_second_failure(capsys):
    hint = Hint(idea="shift the targets by one position", code="labels = tgt[:, 1:]")

    def check(value):
        ex = Exercise("tiers")
        with ex.run():
            ex.compare("the labels", value, 1.0, mistakes={hint: 2.0})
        return ex.result.lines

    first = check(2.0)
    assert "  hint: shift the targets by one position" in first
    assert not any("labels = tgt[:, 1:]" in line for line in first), first
    assert any('show_hint("tiers")' in line for line in first), first
    capsys.readouterr()
    show_hint("tiers")
    assert capsys.readouterr().out == "next step: labels = tgt[:, 1:]\n"
    assert "  next step: labels = tgt[:, 1:]" in check(2.0)
    check(1.0)
    show_hint("tiers")
    assert "no failure with one" in capsys.readouterr().out
    show_hint("never-checked")
    assert "has not been checked yet" in capsys.readouterr().out
