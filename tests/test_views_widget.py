"""The scaffold of every lesson widget (views/widget.py), and rules all the builders keep: each draws, follows its
controls, and lives in a view module named like its lesson."""

import ast
import base64
import importlib
import inspect
from pathlib import Path

import ipywidgets as widgets
import matplotlib
import pytest
import torch

import transformer_lib.views
from course_files import LESSONS
from transformer_lib.views.widget import LessonWidget

matplotlib.use("Agg")

VIEWS_DIR = Path(transformer_lib.views.__file__).parent
SHARED_MODULES = {"__init__", "plots", "widget"}  # not tied to one lesson
# One call per builder, with small inputs; test_every_builder_is_driven_here keeps this list complete.
BUILDERS = {
    "pipeline_widget": ("start_here", lambda m: m.pipeline_widget()),
    "vector_angle_widget": ("similarity", lambda m: m.vector_angle_widget()),
    "attention_scores_widget": ("attention_scores", lambda m: m.attention_scores_widget(
        ["a", "b", "c"], torch.eye(3) + 0.5, ["a b c", "c a"])),
    "masking_widget": ("masking", lambda m: m.masking_widget()),
    "scaling_widget": ("queries_keys_values", lambda m: m.scaling_widget(d_k=8)),
    "translator_heads_widget": ("multi_head_attention", lambda m: m.translator_heads_widget(*tiny_translator())),
    "sampling_widget": ("decoding", lambda m: m.sampling_widget(torch.tensor([2.0, 1.0, 0.0, -1.0]), list("abcd"))),
    "attention_memory_widget": ("gpt2_and_llms", lambda m: m.attention_memory_widget()),
    "speculative_widget": ("faster_and_bigger", lambda m: m.speculative_widget()),
    "bpe_merges_widget": ("gpt2_and_llms", lambda m: m.bpe_merges_widget("low lower lowest", max_merges=8)),
    "induction_head_widget": ("inside_a_trained_model", lambda m: m.induction_head_widget(tiny_attention_only_gpt())),
    "fine_tuning_widget": ("fine_tuning", lambda m: m.fine_tuning_widget(*tiny_character_gpts())),
    "group_advantage_widget": ("preferences_and_rewards", lambda m: m.group_advantage_widget()),
    "comparison_widget": ("evaluation", lambda m: m.comparison_widget()),
}


def tiny_character_gpts():
    """Two untrained character GPTs over the characters of lesson 15's instructions: enough for its widget to answer."""
    from transformer_lib import GPT, CharTokenizer, GPTConfig

    tokenizer = CharTokenizer("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 +{}~")
    models = {}
    for seed, name in enumerate(("base", "tuned")):
        torch.manual_seed(seed)
        models[name] = GPT(GPTConfig(vocab_size=len(tokenizer), block_size=32, d_model=16, num_heads=2, num_layers=1,
                                     d_ff=32)).eval()
    return models, tokenizer


def tiny_attention_only_gpt():
    """An untrained attention-only GPT over lesson 13's 64 symbols: enough for its widget to show a head."""
    from transformer_lib import GPT, GPTConfig

    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=64, block_size=32, d_model=16, num_heads=2, num_layers=2,
                         feed_forward=False)).eval()


def tiny_translator():
    """An untrained translator of a few sentences: enough for the lesson 06 widget to show its heads."""
    from transformer_lib import Transformer, TransformerConfig, make_translation_task

    task = make_translation_task(num_train=20, num_valid=2, num_test=4, num_unseen=0)
    torch.manual_seed(0)
    return Transformer(TransformerConfig(
        src_vocab_size=len(task.src_vocab), tgt_vocab_size=len(task.tgt_vocab), d_model=8, num_heads=2,
        num_encoder_layers=1, num_decoder_layers=1, d_ff=16, dropout=0.0, max_len=32, share_embeddings=False,
    )), task, task.test[:2]


def view_modules() -> list[str]:
    """The view modules, less the shared ones and the temporary shims left at old module paths."""
    names = []
    for path in sorted(VIEWS_DIR.glob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if path.stem not in SHARED_MODULES and not docstring.startswith("TEMPORARY SHIM"):
            names.append(path.stem)
    return names


def build(name: str) -> LessonWidget:
    module, call = BUILDERS[name]
    return call(importlib.import_module(f"transformer_lib.views.{module}"))


def another_value(control: widgets.ValueWidget):
    """A valid value for ``control`` other than its current one."""
    if isinstance(control, widgets.Checkbox):
        return not control.value
    if isinstance(control, widgets.Text):
        return control.value + " and newer words"
    if isinstance(control, widgets.Dropdown):
        values = [option[1] if isinstance(option, tuple) else option for option in control.options]
        return next(v for v in values if v != control.value)
    return control.max if control.value != control.max else control.min


def test_view_modules_are_named_like_lessons():
    topics = {path.stem.split("_", 1)[1] for path in LESSONS}  # 03_queries_keys_values -> queries_keys_values
    assert set(view_modules()) <= topics, f"name these after their lesson: {sorted(set(view_modules()) - topics)}"


def test_every_builder_is_driven_here():
    found = {name for module in view_modules()
             for name, obj in inspect.getmembers(importlib.import_module(f"transformer_lib.views.{module}"))
             if inspect.isfunction(obj) and obj.__module__.endswith(f".{module}") and name.endswith("_widget")}
    assert found == set(BUILDERS)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_builder_draws_and_follows_each_control(name):
    w = build(name)
    assert isinstance(w, LessonWidget)
    assert list(w.children[: len(w.controls)]) == list(w.controls.values())
    assert all(control.style.description_width == "initial" for control in w.controls.values())
    assert w.readout.value and w.state
    state = w.state
    for control in w.controls.values():
        shown = (w.readout.value, bytes(w.plot.value) if w.plot else b"")
        control.value = another_value(control)
        assert w.state is state  # updated in place
        assert (w.readout.value, bytes(w.plot.value) if w.plot else b"") != shown, f"{control.description} did nothing"
    if w.plot is not None:
        assert bytes(w.plot.value).startswith(b"\x89PNG")


def test_lesson_widget_recomputes_once_per_change_and_draws_only_with_draw():
    calls = []

    def compute(values):
        calls.append(values)
        return {"double": 2 * values["n"]}

    slider = widgets.IntSlider(value=1, min=0, max=5, description="n")
    w = LessonWidget({"n": slider}, compute, "2n = <b>{double}</b>")
    assert calls == [{"n": 1}] and w.state == {"double": 2} and w.readout.value == "2n = <b>2</b>"
    assert w.plot is None and w.readout in w.children
    slider.value = 4
    assert calls == [{"n": 1}, {"n": 4}] and w.state == {"double": 8} and w.readout.value == "2n = <b>8</b>"

    drawn = LessonWidget({"n": widgets.IntSlider(value=1)}, compute, "{double}",
                         draw=lambda state, figure: figure.subplots().set_title(str(state["double"])))
    assert drawn.plot in drawn.children and bytes(drawn.plot.value).startswith(b"\x89PNG")


def test_a_failing_compute_is_not_hidden_outside_a_kernel():
    def compute(values):
        raise ValueError(f"bad n={values['n']}")

    with pytest.raises(ValueError, match="bad n=1"):
        LessonWidget({"n": widgets.IntSlider(value=1)}, compute, "")


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_widget_displays_with_a_still_picture_and_a_text_that_every_machine_prints_alike(name):
    """Front ends without live widgets (nbconvert, a static site) pick the PNG or the text from the same display
    data; JupyterLab picks the widget view (tests/browser/ checks that it still draws every widget)."""
    w = build(name)
    data = w._repr_mimebundle_()
    assert set(data) == {WIDGET_VIEW, "image/png", "text/plain"}
    assert data[WIDGET_VIEW]["model_id"] == w.model_id
    assert base64.b64decode(data["image/png"]).startswith(b"\x89PNG")
    assert data["text/plain"].startswith("Interactive widget (")
    assert all(control.description in data["text/plain"] for control in w.controls.values())
    again = build(name)._repr_mimebundle_()
    assert again["text/plain"] == data["text/plain"], "the text must not depend on the run (no ids, no addresses)"
    assert again[WIDGET_VIEW]["model_id"] != w.model_id


def test_the_still_picture_follows_the_controls_and_shows_a_widget_without_a_figure():
    def compute(values):
        return {"double": 2 * values["n"]}

    slider = widgets.IntSlider(value=1, min=0, max=5, description="n")
    drawn = LessonWidget({"n": slider}, compute, "2n = <b>{double}</b>",
                         draw=lambda state, figure: figure.subplots().bar([0], [state["double"]]))
    first = drawn.still_png()
    assert first != bytes(drawn.plot.value), "the still adds the controls and the read-out above the figure"
    slider.value = 4
    assert drawn.still_png() != first
    assert drawn.fallback_text() == (
        "Interactive widget (n): it runs in a live Jupyter kernel with ipywidgets; where widgets cannot be shown, "
        "a still picture of it stands in.")

    text_only = LessonWidget({"n": widgets.IntSlider(value=1)}, compute, "2n = <b>{double}</b> costs $1")
    assert text_only.plot is None
    assert base64.b64decode(text_only._repr_mimebundle_()["image/png"]).startswith(b"\x89PNG")

