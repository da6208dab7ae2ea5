"""cosine_similarity agrees with PyTorch, accepts NumPy and torch, and refuses bad input clearly."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from transformer_lib import cosine_similarity, most_similar_word, vector_from_polar, word_feature_table


def test_pairwise_matrix_matches_torch():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(4, 6, generator=gen, dtype=torch.float64)  # (n, d)
    b = torch.randn(3, 6, generator=gen, dtype=torch.float64)  # (m, d)
    expected = F.cosine_similarity(a[:, None, :], b[None, :, :], dim=-1)  # (n, m)
    torch.testing.assert_close(cosine_similarity(a, b), expected)


def test_vectors_give_a_scalar_matching_torch():
    a = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    b = torch.tensor([-2.0, 0.5, 4.0], dtype=torch.float64)
    result = cosine_similarity(a, b)
    assert result.shape == ()
    torch.testing.assert_close(result, F.cosine_similarity(a, b, dim=0))


def test_numpy_in_numpy_out():
    a = np.array([[1.0, 0.0], [1.0, 1.0]])
    result = cosine_similarity(a, a)
    assert isinstance(result, np.ndarray)
    np.testing.assert_allclose(result, [[1.0, 2**-0.5], [2**-0.5, 1.0]])


def test_the_word_table_gives_0_71_for_orange_and_apple():
    words, features = word_feature_table()
    table = cosine_similarity(features, features)
    assert round(float(table[words.index("Orange"), words.index("Apple")]), 2) == 0.71
    assert float(table[words.index("And"), words.index("An")]) == pytest.approx(1.0)
    assert torch.all(table <= 1.0)


def test_zero_vector_raises_naming_the_row():
    a = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match=r"zero vector: a \(rows \[1\]\) has length 0"):
        cosine_similarity(a, a)
    with pytest.raises(ValueError, match="zero vector: b has length 0"):
        cosine_similarity(torch.ones(2), torch.zeros(2))


@pytest.mark.parametrize(
    ("shape_a", "shape_b", "message"),
    [
        ((3,), (4,), "same number of components: got 3 and 4"),
        ((2, 3), (3,), r"got shapes \(2, 3\) and \(3,\)"),
        ((1, 2, 3), (1, 2, 3), "two vectors"),
    ],
)
def test_shape_errors_name_the_shapes(shape_a, shape_b, message):
    with pytest.raises(ValueError, match=message):
        cosine_similarity(torch.ones(shape_a), torch.ones(shape_b))


def test_most_similar_word_skips_the_word_itself():
    words, features = word_feature_table()
    assert most_similar_word("Orange", words, features) == "Apple"
    assert most_similar_word("An", words, features) == "And"
    with pytest.raises(ValueError, match="'Pear' is not one of the words"):
        most_similar_word("Pear", words, features)


def test_heatmap_labels_the_axes_and_annotates_cells():
    from transformer_lib.views.plots import heatmap

    words, features = word_feature_table()
    ax = heatmap(cosine_similarity(features, features), words, words, "cosine", "word", "word")
    assert [t.get_text() for t in ax.get_xticklabels()] == words
    assert ax.get_title() == "cosine" and ax.get_xlabel() == "word"
    assert "0.71" in [t.get_text() for t in ax.texts]
    with pytest.raises(ValueError, match="labels do not match"):
        heatmap(features, words, words, "t", "x", "y")


def test_vector_from_polar_has_the_length_and_angle_asked_for():
    v = vector_from_polar(2.0, 60.0)
    assert v.shape == (2,) and v.dtype == torch.float64
    assert float(v.norm()) == pytest.approx(2.0)
    torch.testing.assert_close(v, torch.tensor([1.0, 3**0.5], dtype=torch.float64))
    assert float(cosine_similarity(vector_from_polar(1.0, 0.0), vector_from_polar(3.0, 60.0))) == pytest.approx(0.5)
