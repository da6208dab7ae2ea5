"""The lesson 01 checks accept the solutions, spot stubs, and name the typical mistakes."""

import torch

from check_helpers import assert_rejected_with, stub
from transformer_lib import cosine_similarity, most_similar_word
from transformer_lib.checks import ex01_similarity as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def test_every_check_reports_a_stub_as_not_attempted(capsys):
    for check_fn in (check.dot_product, check.norm, check.cosine_matrix, check.most_similar):
        result = check_fn(stub)
        assert not result.attempted and not result.ok
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 4


def test_dot_product_accepts_the_solution_and_names_missing_sum():
    assert check.dot_product(lambda a, b: (a * b).sum()).ok
    assert_rejected_with(check.dot_product(lambda a, b: a * b), "add them up with .sum()")


def test_norm_accepts_the_solution_and_names_missing_square_root():
    assert check.norm(lambda v: (v**2).sum().sqrt()).ok
    result = check.norm(lambda v: (v**2).sum())
    assert_rejected_with(result, "you forgot the square root")
    assert any("expected 8.775, got 77" in line for line in result.lines), result.lines


def test_cosine_matrix_accepts_the_solution_and_names_the_mistakes(capsys):
    assert check.cosine_matrix(lambda a, b: cosine_similarity(a, b)).ok
    assert_rejected_with(check.cosine_matrix(lambda a, b: a @ b.T), "you returned dot products")
    assert_rejected_with(check.cosine_matrix(lambda a, b: cosine_similarity(a, b).T), "your matrix is transposed")
    printed = capsys.readouterr().out
    assert "expected shape (2, 3), got shape (3, 2)" in printed


def test_most_similar_accepts_the_solution_and_names_the_mistakes():
    assert check.most_similar(most_similar_word).ok

    def returns_itself(word, words, features):
        table = cosine_similarity(features, features)
        return words[int(table[words.index(word)].argmax())]

    def by_dot_product(word, words, features):
        scores = features @ features[words.index(word)]
        scores[words.index(word)] = float("-inf")
        return words[int(scores.argmax())]

    assert_rejected_with(check.most_similar(returns_itself), "you returned the word itself")
    assert_rejected_with(check.most_similar(by_dot_product), "you compared dot products")


def test_a_crash_in_the_student_code_is_one_failed_line():
    result = check.dot_product(lambda a, b: torch.dot(a, b[:2]))
    assert not result.ok and result.attempted
    assert any("raised RuntimeError" in line for line in result.lines), result.lines
