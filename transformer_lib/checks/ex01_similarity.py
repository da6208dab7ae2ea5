"""Checks for lesson 01's exercises: dot product, norm, a cosine matrix to debug, the top pairs to predict, the most
similar word, a feature vector built for given angles, and an embedding lookup written as a matrix product."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..similarity import cosine_similarity, most_similar_word, word_feature_table
from ._feedback import CheckResult, Exercise, Hint

_A = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
_B = torch.tensor([4.0, -5.0, 6.0], dtype=torch.float64)
_ELEMENT_WISE = Hint(idea="you returned the element-wise products: a dot product also adds them up into one number",
                     code="return (a * b).sum()", id="element-wise-not-summed")
_MEAN = Hint(idea="you averaged the products: a dot product adds them up, it does not divide by their number",
             code="(a * b).sum(), not (a * b).mean()", id="mean-not-sum")
_SUMS = Hint(idea="you multiplied the two vectors' sums: multiply matching components first, then add the products",
             id="sums-multiplied")
_LENGTHS = Hint(idea="you multiplied the two lengths |a| |b|: that equals the dot product only when a and b point the "
                     "same way (cos 0 = 1)", id="lengths-multiplied")


_MODIFIED = Hint(idea="your function changed the tensors it was given (an in-place operation such as mul_, **= or "
                      "+=): they are the caller's data, so compute into new tensors",
                 code="(a * b).sum() makes a new tensor; a.mul_(b) or a *= b overwrites a", id="modified-input")


def _call_unchanged(ex: Exercise, student_fn: Callable, *inputs: torch.Tensor) -> object:
    """Call the student's function on copies of ``inputs``; a copy changed in place fails one check, named."""
    given = [x.clone() for x in inputs]
    got = ex.call(student_fn, *given)
    if not all(torch.equal(copy, x) for copy, x in zip(given, inputs, strict=True)):
        ex.require("your function leaves its inputs unchanged", False, problem="it changed a tensor it was given",
                   hint=_MODIFIED)
    return got


def _pair_of_columns() -> tuple[torch.Tensor, torch.Tensor]:
    """Two (5,) vectors with a negative dot product, each a column of one matrix (so not contiguous in memory)."""
    columns = torch.tensor([[1.0, -2.0], [0.5, 3.0], [-4.0, 1.5], [2.0, 0.5], [0.0, -1.0]], dtype=torch.float64)
    return columns[:, 0], columns[:, 1]  # (5,) each, stride 2


def dot_product(student_fn: Callable) -> CheckResult:
    """Check a function (d,), (d,) -> scalar that returns the dot product of two vectors."""
    ex = Exercise("dot_product")
    with ex.run():
        _, features = word_feature_table()
        first, second = _pair_of_columns()
        cases = (("the dot product of [1, 2, 3] and [4, -5, 6]", _A, _B),
                 ("the dot product of Orange and Apple (the word-feature table)", features[0], features[2]),
                 ("the dot product of two columns of a (5, 2) matrix (d = 5, not contiguous, negative)", first,
                  second))
        for what, a, b in cases:  # the first failure stops: one hint, one diagnosis
            if not ex.compare(what, _call_unchanged(ex, student_fn, a, b), a @ b,
                              hint="multiply matching components, then add the products up",
                              mistakes={_ELEMENT_WISE: a * b, _MEAN: (a * b).mean(), _SUMS: a.sum() * b.sum(),
                                        _LENGTHS: a.norm() * b.norm()}) or not ex.result.ok:
                break
    return ex.result


def norm(student_fn: Callable) -> CheckResult:
    """Check a function (d,) -> scalar that returns a vector's Euclidean length."""
    ex = Exercise("norm")
    with ex.run():
        column, _ = _pair_of_columns()
        for what, v in (("the length of [4, -5, 6]", _B), ("the length of [3, 4]", torch.tensor([3.0, 4.0])),
                        ("the length of a column of a (5, 2) matrix (d = 5, not contiguous)", column)):
            if not ex.compare(
                what,
                _call_unchanged(ex, student_fn, v),
                torch.linalg.vector_norm(v),
                hint="square each component, add the squares, take the square root",
                mistakes={
                    Hint("you forgot the square root: that is the squared length", id="norm-no-square-root"):
                        (v**2).sum(),
                    Hint("you added absolute values (the L1 norm): square the components instead", id="l1-norm"):
                        v.abs().sum(),
                    Hint("you added the components without squaring them", id="norm-no-squares"): v.sum(),
                    Hint("you averaged the squares (the root mean square): the length adds them up",
                         id="root-mean-square"): (v**2).mean().sqrt(),
                },
            ) or not ex.result.ok:
                break
    return ex.result


def _columns_normalised(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """What a cosine matrix gives when it divides by the columns' lengths (dim=0) instead of the rows'."""
    return (a / a.norm(dim=0, keepdim=True)) @ (b / b.norm(dim=0, keepdim=True)).T


_ONE_SIDE = Hint("you divided by the first vectors' lengths only: divide by both", id="one-side-normalised")


def cosine_matrix(student_fn: Callable) -> CheckResult:
    """Check a function (n, d), (m, d) -> (n, m) of pairwise cosine similarities."""
    ex = Exercise("cosine_matrix")
    with ex.run():
        _, features = word_feature_table()
        wrong_axis = Hint("you divided by the columns' lengths (dim=0): each row (word) must be divided by its own "
                          "length", id="cosine-wrong-axis")
        transposed = Hint("your matrix is transposed: entry [i, j] must compare row i of a with row j of b",
                          id="transposed-matrix")
        not_normalised = Hint("you returned dot products: divide each one by both vectors' lengths",
                              id="cosine-not-normalised")
        stored = torch.randn(6, 7, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
        cases = (("the cosine table of the five words (5 x 5)", features, features),
                 # (2, 3) and (3, 3): different counts catch a transpose
                 ("rows Orange, Phone against rows Apple, And, An (2 x 3)", features[:2], features[2:]),
                 ("4 random rows against 3 (d = 6, negative entries, columns of a stored matrix: not contiguous)",
                  stored.T[:4], stored.T[4:]))
        for what, a, b in cases:  # the first failure stops: one hint, one diagnosis
            expected = cosine_similarity(a, b)  # (n, m)
            mistakes = {wrong_axis: _columns_normalised(a, b), not_normalised: a @ b.T,
                        _ONE_SIDE: (a / a.norm(dim=-1, keepdim=True)) @ b.T}
            if a.shape[0] != b.shape[0]:
                mistakes[transposed] = expected.T
            if not ex.compare(what, ex.call(student_fn, a, b), expected,
                              hint="entry [i, j] compares row i of the first matrix with row j of the second: "
                                   "a @ b.T, each dot product divided by the lengths of both rows",
                              mistakes=mistakes):
                break
    return ex.result


_ITSELF = Hint("you returned the word itself: leave it out (its cosine with itself is 1)", id="returned-itself")


def most_similar(student_fn: Callable) -> CheckResult:
    """Check a function (word, words, features (n_words, d)) -> the most similar other word, by cosine."""
    ex = Exercise("most_similar")
    with ex.run():
        words, features = word_feature_table()
        # A long vector wins on dot products although another word points the same way.
        sizes = torch.tensor([[1.0, 0.2], [1.0, 0.25], [5.0, 3.0]], dtype=torch.float64)  # (3 words, 2)
        # Every other word points away from 'hot': all its cosines are negative, so a score of 0 beats them.
        weather = torch.tensor([[1.0, 0.0], [-1.0, 0.1], [-1.0, -0.4]], dtype=torch.float64)  # (3 words, 2)
        cases = [(word, words, features, "") for word in ("Orange", "Phone", "And", "An")] + [
            ("kitten", ["kitten", "cat", "lion"], sizes, " among kitten, cat, lion"),
            ("hot", ["hot", "cold", "freezing"], weather, " among hot, cold, freezing (all other cosines < 0)")]
        for word, vocabulary, table, among in cases:  # the first failure stops: one hint, one diagnosis
            expected = most_similar_word(word, vocabulary, table)
            scores = table @ table[vocabulary.index(word)]  # (n_words,) dot products with the word
            scores[vocabulary.index(word)] = float("-inf")
            mistakes = {Hint("you returned the word's index: return the word, words[index]", id="returned-index"):
                        vocabulary.index(expected)}
            if vocabulary[int(scores.argmax())] != expected:
                mistakes[Hint("you compared dot products: a long vector wins; use the cosine",
                              id="dot-product-not-cosine")] = vocabulary[int(scores.argmax())]
            if among.endswith("< 0)"):
                mistakes[Hint("you returned the word itself: a score of 0 (or any number above -1) does not leave "
                              "it out when every other cosine is negative; give it -inf", id="itself-scored-zero")
                         ] = word
            else:
                mistakes[_ITSELF] = word
            if not ex.compare(f"the word most similar to {word!r}{among}",
                              ex.call(student_fn, word, list(vocabulary), table.clone()), expected,
                              hint="compare the word's cosine with every other word and take the largest",
                              mistakes=mistakes):
                break
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
            mistakes={Hint("An · An = 9 is a word with itself: pick two different words", id="word-with-itself"):
                      "An & An",
                      Hint("that is the largest cosine: the dot product also counts length",
                           id="largest-cosine-not-dot"): "An & And",
                      Hint("that pair's dot product is 6: Phone is longer than Orange", id="ignored-length"):
                      "Apple & Orange"},
        )
        ex.compare(
            "the pair of different words with the largest cosine",
            _pair(prediction["cosine"]),
            _top_pair(cosine_similarity(features, features), words),
            hint="the cosine ignores length: which two different words point in exactly the same direction?",
            mistakes={Hint("that is the largest dot product: the cosine divides by both lengths",
                           id="largest-dot-not-cosine"): "Apple & Phone",
                      Hint("a word with itself does not count: pick two different words", id="word-with-itself"):
                      "An & An"},
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
                Hint("math.cos and torch.cos take radians: use math.cos(math.radians(60))",
                     id="degrees-not-radians"): _angles(in_radians, phone_and),
                Hint("you made the dot products equal cos 60° and cos 30°: the cosine also divides by both lengths",
                     id="dot-products-not-cosines"): _angles(dot_products, phone_and),
                Hint("the two angles are swapped: 60° with Phone (Tech), 30° with And (Other)", id="angles-swapped"):
                    torch.tensor([30.0, 60.0], dtype=torch.float64),
                Hint("the features are Tech, Fruitness, Other: And lies along the third one",
                     id="wrong-feature-axis"): torch.tensor(
                    [60.0, 90.0], dtype=torch.float64),
            },
        )
    return ex.result


_INTEGER_ONE_HOT = Hint(idea="one_hot gives integers (int64) and the table holds floats: convert one of them first",
                        code="one_hot.to(table.dtype) @ table", id="integer-one-hot")
_NUM_CLASSES = Hint(idea="the one-hot rows need vocab_size entries, also when the largest ids do not occur: "
                         "one_hot(ids) alone makes only (largest id + 1) columns",
                    code="torch.nn.functional.one_hot(ids, num_classes=table.shape[0])", id="missing-num-classes")


_CRASHED = object()  # what _lookup returns after reporting a classic crash


def _lookup(ex: Exercise, student_fn: Callable, ids: torch.Tensor, table: torch.Tensor, what: str) -> object:
    """Call the student's lookup; the two classic crashes of one-hot @ table become a ✘ line naming the mistake
    (and _CRASHED is returned); any other error is reported by ``ex.run``."""
    try:
        return student_fn(ids.clone(), table.clone())
    except NotImplementedError:  # a stub (NotImplementedError is a RuntimeError): "not attempted yet"
        raise
    except RuntimeError as error:
        hint = (_INTEGER_ONE_HOT if "dtype" in str(error)
                else _NUM_CLASSES if "cannot be multiplied" in str(error) else None)
        if hint is None:
            raise
        ex.require(what, False, problem=f"your code raised RuntimeError: {error}", hint=hint)
        return _CRASHED


def one_hot_lookup(student_fn: Callable) -> CheckResult:
    """Check a function ids (T,), table (vocab_size, d_model) -> (T, d_model): one-hot rows times the table."""
    ex = Exercise("one_hot_lookup")
    with ex.run():
        if not callable(student_fn):
            ex.call(student_fn)  # reports "expected a function"
        words, features = word_feature_table()
        ids = torch.tensor([4, 2, 3, 4, 0])  # "an apple and an orange": An, Apple, And, An, Orange
        expected = torch.nn.Embedding.from_pretrained(features)(ids)  # (T, d_model) = (5, 3)
        what = "the vectors of 'an apple and an orange' (5 tokens, d_model = 3)"
        got = _lookup(ex, student_fn, ids, features, what)
        if got is _CRASHED:
            return ex.result
        first_passed = ex.compare(
            what,
            got,
            expected,
            hint=Hint(idea="one one-hot row per token, of vocab_size entries, times the (vocab_size, d_model) table",
                      code="torch.nn.functional.one_hot(ids, num_classes=table.shape[0]).to(table.dtype) @ table"),
            mistakes={
                Hint(idea="you returned the one-hot rows themselves: they only select; multiply them by the table",
                     code="one_hot.to(table.dtype) @ table", id="one-hot-not-multiplied"):
                    torch.nn.functional.one_hot(ids, len(words)).to(features.dtype),
                Hint(idea="your result has one column per token: it must have one row per token, (T, d_model)",
                     code="one_hot (T, vocab_size) @ table (vocab_size, d_model), not table.T @ one_hot.T",
                     id="transposed-result"):
                    expected.T,
                Hint(idea="each distinct id was looked up once: a token that occurs twice needs its row twice",
                     code="build the one-hot rows from ids itself, not from ids.unique()", id="unique-ids"):
                    features[ids.unique()],
            },
        )
        if not first_passed:  # the second case tests only what the first cannot: ids that do not reach vocab_size
            return ex.result
        generator = torch.Generator().manual_seed(0)
        table = torch.randn(6, 4, generator=generator, dtype=torch.float64)  # vocab_size 6, d_model 4
        rare = torch.tensor([3, 1, 3])  # the largest ids, 4 and 5, do not occur
        what = "3 tokens looked up in a random (6, 4) table whose largest ids, 4 and 5, do not occur"
        got = _lookup(ex, student_fn, rare, table, what)
        if got is _CRASHED:
            return ex.result
        ex.compare(what, got, torch.nn.Embedding.from_pretrained(table)(rare), hint=_NUM_CLASSES)
    return ex.result
