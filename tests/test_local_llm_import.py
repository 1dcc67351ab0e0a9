"""The embedded model's engine installed but not loadable: the error names the real cause.

In a slim image without ``libgomp1``, ``xllamacpp`` is installed (so ``find_spec`` finds it)
but importing it fails in the dynamic loader. /healthz and a chat turn must then say that,
not advise installing an extra that is installed already (issue 25).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from types import ModuleType

import pytest

from chazbot.agent import local_llm
from chazbot.config import LLMConfig
from chazbot.errors import BackendError

LOADER_ERROR = "libgomp.so.1: cannot open shared object file: No such file or directory"


class _BrokenEngine(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``xllamacpp`` and fails to load it the way the dynamic loader does."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "xllamacpp":
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        raise ImportError(LOADER_ERROR)


async def test_an_engine_that_cannot_be_imported_is_named_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))
    monkeypatch.delitem(sys.modules, "xllamacpp", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_BrokenEngine(), *sys.meta_path])
    assert local_llm.engine_available()  # installed, as far as pip can tell
    # An n_ctx no other test uses: a fresh engine, not one loaded earlier in this process.
    chat = local_llm.LocalChat(LLMConfig(backend="local", model=str(gguf), context_tokens=777))
    with pytest.raises(BackendError) as caught:
        await chat.ping()
    message = str(caught.value)
    assert LOADER_ERROR in message and "xllamacpp" in message, message
    assert "pip install" not in message and "\n" not in message
