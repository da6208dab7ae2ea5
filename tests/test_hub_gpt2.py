"""``load_hf_gpt2`` and lesson 12's "real GPT-2" cell, run on a fake Hugging Face cache: a tiny ``GPT2LMHeadModel``
and a matching byte-level BPE tokenizer saved where the Hub's cache keeps a repository's files
(``models--{org}--{name}/snapshots/{commit}/``, with ``refs/main`` naming the commit), under a temporary HF_HOME with
the Hub offline. Nothing is downloaded.

A whole cache loads, converts to the course's GPT with the same logits and generates; a cache holding only the model
(what ``GPT2LMHeadModel.from_pretrained`` alone leaves) and an empty one give a one-line error naming the fix, and the
lesson cell prints that line instead of failing."""

import json

import huggingface_hub.constants
import pytest
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from course_tools import NOTEBOOKS_DIR
from transformer_lib import GPT, generate, greedy_pick, load_hf_gpt2, train_bpe, zen_of_python

NAME = "openai-community/gpt2"  # the repository the lesson cell loads
COMMIT = "0123456789abcdef0123456789abcdef01234567"  # a snapshot's folder is named by its commit
PROMPT = "The Transformer is a"  # the lesson cell's prompt
FLOAT32 = dict(rtol=1e-4, atol=1e-4)  # float32 logits of two implementations, as in tests/test_gpt2.py
LESSON = NOTEBOOKS_DIR / "12_gpt2_and_llms.ipynb"


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache in tmp_path, offline: the folder ``from_pretrained`` looks in."""
    hub = tmp_path / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # huggingface_hub reads those variables once, when it is imported: set the values it read as well
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return hub


@pytest.fixture(scope="module")
def tiny_tokenizer():
    """GPT-2's kind of tokenizer, small: byte-level BPE (30 merges learnt on the Zen of Python) and GPT-2's one
    special token, <|endoftext|>, as the last id."""
    vocab, merges = train_bpe(zen_of_python(), num_merges=30).hf_vocab_and_merges()
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    end = "<|endoftext|>"
    return transformers.GPT2TokenizerFast(tokenizer_object=bpe, bos_token=end, eos_token=end, unk_token=end)


def tiny_model(vocab_size: int, eos: int):
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=eos,
                                     eos_token_id=eos)
    return transformers.GPT2LMHeadModel(config).eval()


def fill(hub, tokenizer, with_tokenizer=True):
    """Save the tiny model, and its tokenizer unless with_tokenizer is False, as the Hub's cache holds NAME."""
    repository = hub / f"models--{NAME.replace('/', '--')}"
    snapshot = repository / "snapshots" / COMMIT
    tiny_model(len(tokenizer), tokenizer.eos_token_id).save_pretrained(snapshot)
    if with_tokenizer:
        tokenizer.save_pretrained(snapshot)
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text(COMMIT)


def lesson_cell() -> str:
    cells = json.loads(LESSON.read_text(encoding="utf-8"))["cells"]
    sources = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    [source] = [source for source in sources if "load_hf_gpt2(" in source]
    return source


# -- load_hf_gpt2 ---------------------------------------------------------------------------------------------------


def test_a_whole_cache_loads_and_the_course_gpt_matches_it(hub_cache, tiny_tokenizer):
    fill(hub_cache, tiny_tokenizer)
    hf, tokenizer = load_hf_gpt2(NAME)
    assert len(tokenizer) == hf.config.vocab_size == len(tiny_tokenizer) and not hf.training
    ours = GPT.from_hf_gpt2(hf)
    prompt = torch.tensor([tokenizer.encode(PROMPT)])  # (1, T)
    assert prompt.dtype == torch.int64 and prompt.shape[1] > 4
    with torch.no_grad():
        torch.testing.assert_close(ours(prompt), hf(prompt).logits, **FLOAT32)
    sample = generate(ours, prompt, 20, greedy_pick)
    assert sample.shape == (1, prompt.shape[1] + 20)
    assert tokenizer.decode(sample[0]).startswith(PROMPT)


def test_a_cache_with_the_model_alone_gives_an_empty_tokenizer(hub_cache, tiny_tokenizer):
    """The problem load_hf_gpt2 checks for: transformers does not refuse the missing tokenizer files."""
    fill(hub_cache, tiny_tokenizer, with_tokenizer=False)
    tokenizer = transformers.AutoTokenizer.from_pretrained(NAME, local_files_only=True)
    assert len(tokenizer) < len(tiny_tokenizer) and tokenizer.encode(PROMPT) == []


@pytest.mark.parametrize("download, fix", [(False, rf"online, run load_hf_gpt2\('{NAME}', download=True\) once .*"
                                                   r"\(in lesson 12: set DOWNLOAD = True\)"),
                                           (True, "check the network connection")])
def test_a_cache_with_the_model_alone_is_refused_with_the_fix(hub_cache, tiny_tokenizer, download, fix):
    fill(hub_cache, tiny_tokenizer, with_tokenizer=False)
    with pytest.raises(FileNotFoundError, match=rf"{NAME}'s tokenizer is not in this machine's Hugging Face cache, "
                                                rf"only its model.*len\(tokenizer\) = 1 where the model's vocab_size "
                                                rf"= {len(tiny_tokenizer)}; {fix}"):
        load_hf_gpt2(NAME, download=download)


def test_an_empty_cache_is_refused_with_the_fix(hub_cache):
    with pytest.raises(FileNotFoundError, match=rf"{NAME} is not in this machine's Hugging Face cache .*nothing "
                                                r"downloaded; online, run load_hf_gpt2\(.*download=True\) once"):
        load_hf_gpt2(NAME)
    with pytest.raises(OSError, match=f"downloading {NAME} failed: check the network connection"):
        load_hf_gpt2(NAME, download=True)  # offline


def test_download_asks_for_the_files_of_the_model_and_the_tokenizer(hub_cache, tiny_tokenizer, monkeypatch):
    """download=True lets both from_pretrained calls download (here they find everything in the cache)."""
    fill(hub_cache, tiny_tokenizer)
    asked = []
    for cls in (transformers.GPT2LMHeadModel, transformers.AutoTokenizer):
        def spy(name, original=cls.from_pretrained, **kwargs):
            asked.append(kwargs["local_files_only"])
            return original(name, local_files_only=True)

        monkeypatch.setattr(cls, "from_pretrained", spy)
    load_hf_gpt2(NAME)
    load_hf_gpt2(NAME, download=True)
    assert asked == [True, True, False, False]


# -- the lesson's cell ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("files", ["model and tokenizer", "model", "none"])
def test_the_lesson_cell_loads_or_says_why_not(hub_cache, tiny_tokenizer, capsys, files):
    source = lesson_cell()
    assert "DOWNLOAD = False" in source  # the tests never download
    if files != "none":
        fill(hub_cache, tiny_tokenizer, with_tokenizer=files == "model and tokenizer")
    exec(source, {"GPT": GPT, "generate": generate, "greedy_pick": greedy_pick, "load_hf_gpt2": load_hf_gpt2,
                  "torch": torch})
    printed = capsys.readouterr().out.splitlines()
    if files == "model and tokenizer":
        assert len(printed) == 2 and "logits within" in printed[0] and printed[1].startswith(PROMPT)
    else:
        missing = f"{NAME}'s tokenizer is not in" if files == "model" else f"{NAME} is not in"
        assert printed == [printed[0]] and printed[0].startswith(f"nothing loaded: {missing}")
        assert "DOWNLOAD = True" in printed[0]
