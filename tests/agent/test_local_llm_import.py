"""What the Docker image needs from the embedded model (issue 25).

- The engine installed but not loadable: in a slim image without ``libgomp1``, ``xllamacpp``
  is installed (so ``find_spec`` finds it) but importing it fails in the dynamic loader.
  /healthz and a chat turn must then say that, not advise installing an extra that is
  installed already.
- A built-in in chunk packages joined ahead of time (``PREJOINED_DIR``, as the image does
  before it drops the chunk packages) is used where it lies: the model is stored once, not
  once in the image and again in every state directory.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from types import ModuleType

import pytest

from chazbot.agent import local_llm, local_models
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


def test_a_builtin_joined_ahead_of_time_is_used_where_it_lies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = [b"GGUF" + bytes(100), bytes(range(256)), b"tail" * 50]
    for i, chunk in enumerate(chunks, start=1):
        (tmp_path / "site" / f"prejoinparts{i}" / "data").mkdir(parents=True)
        (tmp_path / "site" / f"prejoinparts{i}" / "__init__.py").write_text("")
        (tmp_path / "site" / f"prejoinparts{i}" / "data" / "p.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    prejoined = tmp_path / "venv" / "share" / "chazbot" / "models"
    monkeypatch.setattr(local_models, "PREJOINED_DIR", prejoined)
    parts = tuple((f"prejoinparts{i}", "data/p.bin") for i in range(1, 4))
    digest = hashlib.sha256(b"".join(chunks)).hexdigest()
    builtin = local_llm.Builtin("pre", "Pre", parts, sha256=digest)
    # What the image build does: join into PREJOINED_DIR (checked), then drop the parts.
    joined = builtin.path(prejoined)
    assert joined.parent == prejoined and joined.read_bytes() == b"".join(chunks)
    for i in range(1, 4):
        (tmp_path / "site" / f"prejoinparts{i}" / "data" / "p.bin").unlink()
    assert builtin.installed()
    state_models = tmp_path / "state" / "models"
    assert builtin.path(state_models) == joined
    assert not state_models.exists()  # nothing copied into the state directory
    # checked at every load, like any model: an edited joined file is refused
    joined.write_bytes(b"GGUF" + bytes(99) + b"!" + joined.read_bytes()[104:])
    with pytest.raises(BackendError, match="damaged"):
        builtin.path(state_models)
    # Without the joined file and without the parts, it is not installed.
    joined.unlink()
    assert not builtin.installed()
