"""GPT-2 from the Hugging Face Hub: the model and its tokenizer, from this machine's cache or downloaded once.

:func:`load_hf_gpt2` returns Hugging Face's ``GPT2LMHeadModel`` and its tokenizer; ``GPT.from_hf_gpt2`` then copies
the weights into the course's ``GPT``. By default it reads only the local cache (``local_files_only=True``) and never
downloads; ``download=True`` fetches what the cache lacks, the model's files and the tokenizer's.

Loading the model alone (``GPT2LMHeadModel.from_pretrained``) puts only the model's files in the cache. A tokenizer
loaded later from that cache is not refused: transformers 5 builds one from the model's configuration, with its one
special token and no vocabulary, which encodes any text as no tokens at all. So the tokenizer is checked: it must
have one token per row of the model's embedding (``len(tokenizer) == config.vocab_size``, 50257 for GPT-2).

This module imports ``transformers`` inside the function, so the core still imports with torch and NumPy only.
"""

from __future__ import annotations

from typing import Any

GPT2_HUB_NAME = "openai-community/gpt2"  # GPT-2's smallest model, 124M parameters
CACHE = "this machine's Hugging Face cache"


def load_hf_gpt2(name: str = GPT2_HUB_NAME, download: bool = False) -> tuple[Any, Any]:
    """Hugging Face's ``GPT2LMHeadModel`` for ``name`` (in eval mode) and its tokenizer.

    ``download=False`` reads only this machine's Hugging Face cache and downloads nothing; ``download=True`` also
    downloads what the cache lacks, model and tokenizer (GPT-2's smallest model: about 550 MB, once; later calls find
    it in the cache).

    Raises a ``FileNotFoundError`` whose one-line message says what the cache lacks (the model, or the tokenizer
    beside it) and the fix, and an ``OSError`` when a download fails.
    """
    import transformers  # here, not at the top: the core imports without transformers

    if download:
        fix = "check the network connection (and that HF_HUB_OFFLINE is not set), then run again"
    else:
        fix = (f"online, run load_hf_gpt2({name!r}, download=True) once to fetch the model and its tokenizer "
               "(in lesson 12: set DOWNLOAD = True)")
    try:
        model = transformers.GPT2LMHeadModel.from_pretrained(name, local_files_only=not download).eval()
    except OSError as error:
        if download:
            raise OSError(f"downloading {name} failed: {fix}") from error
        raise FileNotFoundError(f"{name} is not in {CACHE} (HF_HOME, by default ~/.cache/huggingface): "
                                f"nothing downloaded; {fix}") from error
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(name, local_files_only=not download)
    except OSError as error:
        raise FileNotFoundError(f"{name}'s tokenizer is not in {CACHE}, only its model: {fix}") from error
    vocab_size = model.config.vocab_size
    if len(tokenizer) != vocab_size:
        raise FileNotFoundError(
            f"{name}'s tokenizer is not in {CACHE}, only its model (as after GPT2LMHeadModel.from_pretrained alone): "
            f"loaded without its files it is nearly empty, len(tokenizer) = {len(tokenizer)} where the model's "
            f"vocab_size = {vocab_size}; {fix}"
        )
    return model, tokenizer
