"""The lesson 01 checks accept the solutions, spot stubs, and name the typical mistakes."""

import math

import torch

from check_helpers import assert_diagnosed, assert_rejected_with, stub
from transformer_lib import cosine_similarity, most_similar_word
from transformer_lib.checks import ex01_similarity as check
from transformer_lib.checks._feedback import NOT_ATTEMPTED


def test_every_check_reports_a_stub_as_not_attempted(capsys):
    for check_fn in (check.dot_product, check.norm, check.cosine_matrix, check.top_pairs, check.most_similar,
                     check.tablet_vector, check.one_hot_lookup):
        result = check_fn(stub)
        assert not result.attempted and not result.ok
    assert capsys.readouterr().out.count(NOT_ATTEMPTED) == 7


def test_dot_product_accepts_the_solution_and_names_missing_sum():
    assert check.dot_product(lambda a, b: (a * b).sum()).ok
    result = check.dot_product(lambda a, b: a * b)
    assert_rejected_with(result, "you returned the element-wise products: a dot product also adds them up")
    assert not any(".sum()" in line for line in result.lines[:2])  # the first failure names the idea, not the code
    assert_rejected_with(check.dot_product(lambda a, b: a * b), "next step: return (a * b).sum()")  # the second


def test_norm_accepts_the_solution_and_names_missing_square_root():
    assert check.norm(lambda v: (v**2).sum().sqrt()).ok
    result = check.norm(lambda v: (v**2).sum())
    assert_rejected_with(result, "you forgot the square root")
    assert any("expected 8.775, got 77" in line for line in result.lines), result.lines


def test_cosine_matrix_accepts_the_solution_and_names_the_mistakes(capsys):
    assert check.cosine_matrix(lambda a, b: cosine_similarity(a, b)).ok
    assert_rejected_with(check.cosine_matrix(lambda a, b: a @ b.T), "you returned dot products")
    assert_rejected_with(check.cosine_matrix(lambda a, b: cosine_similarity(a, b).T), "your matrix is transposed")

    def by_columns(a, b):  # the buggy function of the exercise notebook
        return (a / a.norm(dim=0, keepdim=True)) @ (b / b.norm(dim=0, keepdim=True)).T

    result = check.cosine_matrix(by_columns)
    assert_rejected_with(result, "you divided by the columns' lengths (dim=0)")
    assert result.passed == 0
    assert_rejected_with(check.cosine_matrix(lambda a, b: (a / a.norm(dim=-1, keepdim=True)) @ b.T),
                         "you divided by the first vectors' lengths only")
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


def test_top_pairs_accepts_the_prediction_and_names_the_mistakes():
    assert check.top_pairs(lambda: {"dot": ("Phone", "Apple"), "cosine": ("An", "And")}).ok
    assert_rejected_with(check.top_pairs(lambda: {"dot": ("An", "An"), "cosine": ("And", "An")}),
                         "a word with itself: pick two different words")
    assert_rejected_with(check.top_pairs(lambda: {"dot": ("And", "An"), "cosine": ("And", "An")}),
                         "that is the largest cosine: the dot product also counts length")
    assert_rejected_with(check.top_pairs(lambda: {"dot": ("Orange", "Apple"), "cosine": ("And", "An")}),
                         "that pair's dot product is 6")
    both_dot = check.top_pairs(lambda: {"dot": ("Phone", "Apple"), "cosine": ("Phone", "Apple")})
    assert_rejected_with(both_dot, "that is the largest dot product: the cosine divides by both lengths")
    assert (both_dot.passed, both_dot.total) == (2, 3)  # the dict and the dot pair are right
    assert_rejected_with(check.top_pairs(lambda: ("Phone", "Apple")), "a dict with the keys 'dot' and 'cosine'")


def test_tablet_vector_accepts_any_length_and_names_the_mistakes():
    assert check.tablet_vector(lambda: torch.tensor([0.5, 0.0, math.sqrt(0.75)])).ok
    assert check.tablet_vector(lambda: [2.0, 0.0, 2.0 * math.sqrt(3.0)]).ok  # any positive multiple, any kind
    assert_rejected_with(check.tablet_vector(lambda: torch.tensor([math.cos(60), 0.0, math.cos(30)])),
                         "math.cos and torch.cos take radians")
    by_dot = torch.tensor([0.5 / 4, 0.0, math.cos(math.radians(30)) / 2])  # a · Phone = cos 60°, a · And = cos 30°
    assert_rejected_with(check.tablet_vector(lambda: by_dot), "you made the dot products equal cos 60° and cos 30°")
    assert_rejected_with(check.tablet_vector(lambda: torch.tensor([math.sqrt(0.75), 0.0, 0.5])),
                         "the two angles are swapped")
    assert_rejected_with(check.tablet_vector(lambda: torch.tensor([0.5, math.sqrt(0.75), 0.0])),
                         "And lies along the third one")
    assert_rejected_with(check.tablet_vector(lambda: torch.tensor([0.5, 0.866])), "got shape (2,)")


def test_a_crash_in_the_student_code_is_one_failed_line():
    result = check.dot_product(lambda a, b: torch.dot(a, b[:2]))
    assert not result.ok and result.attempted
    assert any("raised RuntimeError" in line for line in result.lines), result.lines


def test_one_hot_lookup_accepts_the_solution_and_names_the_mistakes():
    one_hot = torch.nn.functional.one_hot
    assert check.one_hot_lookup(lambda ids, table: one_hot(ids, table.shape[0]).to(table.dtype) @ table).ok
    assert_rejected_with(check.one_hot_lookup(lambda ids, table: one_hot(ids) @ table),
                         "one_hot gives integers (int64) and the table holds floats")
    result = check.one_hot_lookup(lambda ids, table: one_hot(ids).to(table.dtype) @ table)  # no num_classes
    assert result.passed == 1  # right where the largest id occurs, wrong where it does not
    assert_rejected_with(result, "the one-hot rows need vocab_size entries")
    assert_rejected_with(check.one_hot_lookup(lambda ids, table: one_hot(ids, table.shape[0]).to(table.dtype)),
                         "you returned the one-hot rows themselves")
    assert_rejected_with(
        check.one_hot_lookup(lambda ids, table: table.T @ one_hot(ids, table.shape[0]).to(table.dtype).T),
        "your result has one column per token")
    assert_rejected_with(
        check.one_hot_lookup(lambda ids, table: one_hot(ids.unique(), table.shape[0]).to(table.dtype) @ table),
        "each distinct id was looked up once")


def test_each_named_mistake_is_diagnosed_as_itself():
    one_hot = torch.nn.functional.one_hot
    assert_diagnosed(check.dot_product(lambda a, b: a * b), "element-wise-not-summed")
    assert_diagnosed(check.dot_product(lambda a, b: (a * b).mean()), "mean-not-sum")
    assert_diagnosed(check.dot_product(lambda a, b: a.sum() * b.sum()), "sums-multiplied")
    assert_diagnosed(check.dot_product(lambda a, b: a.norm() * b.norm()), "lengths-multiplied")
    assert_diagnosed(check.norm(lambda v: (v**2).sum()), "norm-no-square-root")
    assert_diagnosed(check.norm(lambda v: v.abs().sum()), "l1-norm")
    assert_diagnosed(check.norm(lambda v: v.sum()), "norm-no-squares")
    assert_diagnosed(check.cosine_matrix(lambda a, b: (a / a.norm(dim=0, keepdim=True))
                                         @ (b / b.norm(dim=0, keepdim=True)).T), "cosine-wrong-axis")
    assert_diagnosed(check.cosine_matrix(lambda a, b: a @ b.T), "cosine-not-normalised")
    assert_diagnosed(check.cosine_matrix(lambda a, b: cosine_similarity(a, b).T), "transposed-matrix")
    assert_diagnosed(check.cosine_matrix(lambda a, b: (a / a.norm(dim=-1, keepdim=True)) @ b.T),
                     "one-side-normalised")
    assert_diagnosed(check.most_similar(lambda word, words, features: word), "returned-itself")
    assert_diagnosed(check.most_similar(lambda word, words, features: words.index(most_similar_word(
        word, words, features))), "returned-index")

    def by_dot_product(word, words, features):
        scores = features @ features[words.index(word)]
        scores[words.index(word)] = float("-inf")
        return words[int(scores.argmax())]

    assert_diagnosed(check.most_similar(by_dot_product), "dot-product-not-cosine")
    assert_diagnosed(check.top_pairs(lambda: {"dot": ("An", "An"), "cosine": ("And", "An")}), "word-with-itself")
    assert_diagnosed(check.top_pairs(lambda: {"dot": ("And", "An"), "cosine": ("And", "An")}),
                     "largest-cosine-not-dot")
    assert_diagnosed(check.top_pairs(lambda: {"dot": ("Orange", "Apple"), "cosine": ("And", "An")}), "ignored-length")
    assert_diagnosed(check.top_pairs(lambda: {"dot": ("Phone", "Apple"), "cosine": ("Phone", "Apple")}),
                     "largest-dot-not-cosine")
    assert_diagnosed(check.tablet_vector(lambda: torch.tensor([math.cos(60), 0.0, math.cos(30)])),
                     "degrees-not-radians")
    assert_diagnosed(check.tablet_vector(lambda: torch.tensor([0.5 / 4, 0.0, math.cos(math.radians(30)) / 2])),
                     "dot-products-not-cosines")
    assert_diagnosed(check.tablet_vector(lambda: torch.tensor([math.sqrt(0.75), 0.0, 0.5])), "angles-swapped")
    assert_diagnosed(check.tablet_vector(lambda: torch.tensor([0.5, math.sqrt(0.75), 0.0])), "wrong-feature-axis")
    assert_diagnosed(check.one_hot_lookup(lambda ids, table: one_hot(ids) @ table), "integer-one-hot")
    returns_none = check.one_hot_lookup(lambda ids, table: None)
    assert not returns_none.ok and returns_none.lines[0].startswith("✘")
    assert_diagnosed(check.one_hot_lookup(lambda ids, table: one_hot(ids).to(table.dtype) @ table),
                     "missing-num-classes")
    assert_diagnosed(check.one_hot_lookup(lambda ids, table: one_hot(ids, table.shape[0]).to(table.dtype)),
                     "one-hot-not-multiplied")
    assert_diagnosed(check.one_hot_lookup(lambda ids, table: table.T @ one_hot(ids, table.shape[0]).to(table.dtype).T),
                     "transposed-result")
    assert_diagnosed(check.one_hot_lookup(lambda ids, table: one_hot(ids.unique(), table.shape[0]).to(table.dtype)
                                          @ table), "unique-ids")


def test_the_checks_vary_length_layout_and_sign_and_refuse_in_place_changes():
    def first_three(a, b):  # hard-codes d = 3
        return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]

    assert not check.dot_product(first_three).ok
    assert not check.dot_product(lambda a, b: (a * b).sum().abs()).ok  # right only when the product is positive
    assert check.dot_product(lambda a, b: torch.einsum("i,i->", a, b)).ok
    assert check.dot_product(lambda a, b: float(sum(x * y for x, y in zip(a.tolist(), b.tolist(), strict=True)))).ok

    def multiplied_in_place(a, b):
        a.mul_(b)
        return a.sum()

    def squared_in_place(v):
        v **= 2
        return v.sum().sqrt()

    assert_diagnosed(check.dot_product(multiplied_in_place), "modified-input")
    assert_diagnosed(check.norm(squared_in_place), "modified-input")
    assert check.dot_product(lambda a, b: a @ b).ok  # the in-place answer left the check's own vectors alone
    assert_diagnosed(check.norm(lambda v: (v**2).mean().sqrt()), "root-mean-square")
    assert check.norm(torch.linalg.vector_norm).ok
    assert check.cosine_matrix(lambda a, b: torch.nn.functional.cosine_similarity(a[:, None], b[None], dim=-1)).ok
    assert check.cosine_matrix(lambda a, b: a @ b.T / (a.norm(dim=-1, keepdim=True) * b.norm(dim=-1))).ok
    assert not check.cosine_matrix(lambda a, b: a @ b.T / (a.norm() * b.norm())).ok  # Frobenius norms


def test_a_repeated_mistake_gets_one_hint_and_one_diagnosis():
    for result in (check.dot_product(lambda a, b: a * b), check.norm(lambda v: (v**2).sum()),
                   check.cosine_matrix(lambda a, b: a @ b.T)):
        hints = [line for line in result.lines if line.startswith("  hint:")]
        assert len(hints) == 1 and len(result.diagnoses) == 1, result.lines


def test_most_similar_leaves_the_word_out_when_every_cosine_is_negative():
    def scored_zero(word, words, features):  # 0 beats cosines below 0
        similarities = cosine_similarity(features[words.index(word)][None], features)[0]
        similarities[words.index(word)] = 0.0
        return words[int(similarities.argmax())]

    def scored_minus_two(word, words, features):  # any score below -1 leaves it out
        similarities = cosine_similarity(features[words.index(word)][None], features)[0]
        similarities[words.index(word)] = -2.0
        return words[int(similarities.argmax())]

    def others_lengths_only(word, words, features):  # the word's own length is one factor per row: same argmax
        scores = features @ features[words.index(word)] / features.norm(dim=-1)
        scores[words.index(word)] = float("-inf")
        return words[int(scores.argmax())]

    assert_diagnosed(check.most_similar(scored_zero), "itself-scored-zero")
    assert check.most_similar(scored_minus_two).ok
    assert check.most_similar(others_lengths_only).ok
