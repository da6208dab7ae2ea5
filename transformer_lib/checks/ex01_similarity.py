"""Checks for lesson 01's exercises: dot product, norm, a cosine matrix to debug, the top pairs to predict, the most
similar word, and a feature vector built for given angles."""

from __future__ import annotations

import math
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


def _columns_normalised(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """What a cosine matrix gives when it divides by the columns' lengths (dim=0) instead of the rows'."""
    return (a / a.norm(dim=0, keepdim=True)) @ (b / b.norm(dim=0, keepdim=True)).T


def cosine_matrix(student_fn: Callable) -> CheckResult:
    """Check a function (n, d), (m, d) -> (n, m) of pairwise cosine similarities."""
    ex = Exercise("cosine_matrix")
    with ex.run():
        _, features = word_feature_table()
        wrong_axis = "you divided by the columns' lengths (dim=0): each row (word) must be divided by its own length"
        ex.compare(
            "the cosine table of the five words (5 x 5)",
            ex.call(student_fn, features, features),
            cosine_similarity(features, features),
            hint="divide each dot product by the lengths of both vectors",
            mistakes={
                wrong_axis: _columns_normalised(features, features),
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
                wrong_axis: _columns_normalised(queries, keys),
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


def _pair(words: object) -> str:
    """A pair of words as one order-free string, 'Apple & Phone'."""
    first, second = sorted(words)  # a malformed answer raises here and becomes one ✘ line
    return f"{first} & {second}"


def _top_pair(table: torch.Tensor, words: list[str]) -> str:
    """The two different words with the largest entry of a (n_words, n_words) similarity table."""
    others = table.clone()
    others.fill_diagonal_(float("-inf"))  # a word with itself does not count
    i, j = divmod(int(others.argmax()), len(words))
    return _pair((words[i], words[j]))


def top_pairs(student_fn: Callable) -> CheckResult:
    """Check a prediction {'dot': (word, word), 'cosine': (word, word)}: the pairs that score highest."""
    ex = Exercise("top_pairs")
    with ex.run():
        prediction = ex.call(student_fn)
        if not ex.require("a dict with the keys 'dot' and 'cosine'",
                          isinstance(prediction, dict) and {"dot", "cosine"} <= set(prediction),
                          problem=f"got {prediction!r}", hint="return {'dot': (word, word), 'cosine': (word, word)}"):
            return ex.result
        words, features = word_feature_table()
        ex.compare(
            "the pair of different words with the largest dot product",
            _pair(prediction["dot"]),
            _top_pair(features @ features.T, words),
            hint="the dot product grows with both vectors' lengths: compute a · b for every pair of different words",
            mistakes={"An · An = 9 is a word with itself: pick two different words": "An & An",
                      "that is the largest cosine: the dot product also counts length": "An & And",
                      "that pair's dot product is 6: Phone is longer than Orange": "Apple & Orange"},
        )
        ex.compare(
            "the pair of different words with the largest cosine",
            _pair(prediction["cosine"]),
            _top_pair(cosine_similarity(features, features), words),
            hint="the cosine ignores length: which two different words point in exactly the same direction?",
            mistakes={"that is the largest dot product: the cosine divides by both lengths": "Apple & Phone",
                      "a word with itself does not count: pick two different words": "An & An"},
        )
    return ex.result


def _angles(vector: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
    """The angles in degrees between vector (d,) and each row of others (n, d)."""
    return torch.rad2deg(torch.arccos(cosine_similarity(vector[None], others)[0]))  # (n,)


def tablet_vector(student_fn: Callable) -> CheckResult:
    """Check a (3,) feature vector at 60° from Phone and 30° from And."""
    ex = Exercise("tablet_vector")
    with ex.run():
        got = torch.as_tensor(ex.call(student_fn), dtype=torch.float64)
        if not ex.require("a vector of 3 features (Tech, Fruitness, Other)", got.shape == (3,),
                          problem=f"got shape {tuple(got.shape)}", hint="return one vector of shape (3,)"):
            return ex.result
        _, features = word_feature_table()
        phone_and = features[[1, 3]]  # (2, 3): Phone, And
        in_radians = torch.tensor([math.cos(60.0), 0.0, math.cos(30.0)], dtype=torch.float64)
        dot_products = torch.tensor([0.5 / 4.0, 0.0, math.cos(math.radians(30.0)) / 2.0], dtype=torch.float64)
        ex.compare(
            "the angles of Tablet with Phone and with And, in degrees",
            _angles(got, phone_and),
            torch.tensor([60.0, 30.0], dtype=torch.float64),
            atol=1e-3,
            hint="cos(angle) = component / length, because Phone and And each lie along one feature axis",
            mistakes={
                "math.cos and torch.cos take radians: use math.cos(math.radians(60))": _angles(in_radians, phone_and),
                "you made the dot products equal cos 60° and cos 30°: the cosine also divides by both lengths":
                    _angles(dot_products, phone_and),
                "the two angles are swapped: 60° with Phone (Tech), 30° with And (Other)":
                    torch.tensor([30.0, 60.0], dtype=torch.float64),
                "the features are Tech, Fruitness, Other: And lies along the third one": torch.tensor(
                    [60.0, 90.0], dtype=torch.float64),
            },
        )
    return ex.result
