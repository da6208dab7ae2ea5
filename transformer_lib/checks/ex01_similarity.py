"""Checks for lesson 01's exercises: dot product, norm, cosine-similarity matrix, most similar word."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..similarity import cosine_similarity, most_similar_word, word_feature_table
from ._feedback import CheckResult, Exercise

_A = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
_B = torch.tensor([4.0, -5.0, 6.0], dtype=torch.float64)


def dot_product(student_fn: Callable) -> CheckResult:
    """Check a function (d,), (d,) -> scalar that returns the dot product of two vectors."""
    ex = Exercise("dot_product")
    with ex.run():
        got = ex.call(student_fn, _A, _B)
        ex.compare(
            "the dot product of [1, 2, 3] and [4, -5, 6]",
            got,
            _A @ _B,
            hint="multiply matching components, then add the products up",
            mistakes={"you returned the element-wise products: add them up with .sum()": _A * _B},
        )
        _, features = word_feature_table()
        orange, apple = features[0], features[2]
        ex.compare(
            "the dot product of Orange and Apple (the word-feature table)",
            ex.call(student_fn, orange, apple),
            orange @ apple,
            mistakes={"you returned the element-wise products: add them up with .sum()": orange * apple},
        )
    return ex.result


def norm(student_fn: Callable) -> CheckResult:
    """Check a function (d,) -> scalar that returns a vector's Euclidean length."""
    ex = Exercise("norm")
    with ex.run():
        got = ex.call(student_fn, _B)
        ex.compare(
            "the length of [4, -5, 6]",
            got,
            torch.linalg.vector_norm(_B),
            hint="square each component, add the squares, take the square root",
            mistakes={
                "you forgot the square root: that is the squared length": (_B**2).sum(),
                "you added absolute values (the L1 norm): square the components instead": _B.abs().sum(),
                "you added the components without squaring them": _B.sum(),
            },
        )
        ex.compare("the length of [3, 4]", ex.call(student_fn, torch.tensor([3.0, 4.0])), 5.0)
    return ex.result


def cosine_matrix(student_fn: Callable) -> CheckResult:
    """Check a function (n, d), (m, d) -> (n, m) of pairwise cosine similarities."""
    ex = Exercise("cosine_matrix")
    with ex.run():
        _, features = word_feature_table()
        ex.compare(
            "the cosine table of the five words (5 x 5)",
            ex.call(student_fn, features, features),
            cosine_similarity(features, features),
            hint="divide each dot product by the lengths of both vectors",
            mistakes={
                "you returned dot products: divide each one by both vectors' lengths": features @ features.T,
            },
        )
        queries, keys = features[:2], features[2:]  # (2, 3) and (3, 3): different counts catch a transpose
        expected = cosine_similarity(queries, keys)  # (2, 3)
        a_unit = queries / queries.norm(dim=-1, keepdim=True)
        ex.compare(
            "rows Orange, Phone against rows Apple, And, An (2 x 3)",
            ex.call(student_fn, queries, keys),
            expected,
            hint="entry [i, j] compares row i of the first matrix with row j of the second: a @ b.T, normalised",
            mistakes={
                "your matrix is transposed: entry [i, j] must compare row i of a with row j of b": expected.T,
                "you divided by the first vectors' lengths only: divide by both": a_unit @ keys.T,
            },
        )
    return ex.result


def most_similar(student_fn: Callable) -> CheckResult:
    """Check a function (word, words, features (n_words, d)) -> the most similar other word, by cosine."""
    ex = Exercise("most_similar")
    with ex.run():
        words, features = word_feature_table()
        for word in ("Orange", "Phone", "And", "An"):
            expected = most_similar_word(word, words, features)
            ex.compare(
                f"the word most similar to {word!r}",
                ex.call(student_fn, word, words, features),
                expected,
                hint="compare the word's cosine with every other word and take the largest",
                mistakes={"you returned the word itself: leave it out (its cosine with itself is 1)": word},
            )
        # A long vector wins on dot products although another word points the same way.
        animals = ["kitten", "cat", "lion"]
        sizes = torch.tensor([[1.0, 0.2], [1.0, 0.25], [5.0, 3.0]], dtype=torch.float64)  # (3 words, 2)
        ex.compare(
            "the word most similar to 'kitten' among kitten, cat, lion",
            ex.call(student_fn, "kitten", animals, sizes),
            most_similar_word("kitten", animals, sizes),
            hint="use cosine similarity, not the dot product",
            mistakes={"you compared dot products: the long 'lion' vector wins; use the cosine": "lion"},
        )
    return ex.result
