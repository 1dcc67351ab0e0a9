"""Two parts of the peer: the sync service (``peer.sync``: the server that serves shared
databases and the replicator that keeps imported ones in step) and sharing (``peer.sharing``:
share, unshare and import banks, access requests, the sync pairs).

``Peer.open`` builds each whole: ``SyncService`` first (the registry asks it which databases
a remote withdrew), then ``Sharing`` on it. They return data, never reply text: what a person
reads, with the transport's command prefix, is written in ``commands/`` (``sharing_cmds.py``
and ``peer_cmds.py``); commands reach ``Sharing`` as ``commands.context.SharingDesk``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from chazbot.errors import BackendError, ConflictError, InputError, NotFound, PermissionDenied
from chazbot.memory.banks import admin_key_for, check_name
from chazbot.sync import Replicator, SyncServer, format_ticket, parse_ticket
from chazbot.sync.outcomes import Imported, PendingRequests, SyncPair
from chazbot.sync.store import Remotes
from chazbot.sync.tables import SyncCursors
from chazbot.sync.tickets import address_from_url, format_address, is_wildcard
from chazbot.sync.tls import client_context, server_context

if TYPE_CHECKING:
    from chazbot.config import Config
    from chazbot.ledger import KeyPair, Ledger
    from chazbot.memory.banks import Registry
    from chazbot.sync import Serving
    from chazbot.sync.tables import AccessRequest

log = logging.getLogger("chazbot.peer")


class SyncService:
    """The sync server and the replicator of one peer (``sync_listen``; off when unset).

    ``config`` is the one the peer started with: sync settings apply at the next start."""

    def __init__(self, config: Config, ledger: Ledger, key: KeyPair, serving: Serving) -> None:
        self.config = config
        self.ledger = ledger
        self.key = key
        self.serving = serving
        self.server: SyncServer | None = None
        self.replicator: Replicator | None = None

    def _listen(self) -> tuple[str, int] | None:
        listen = self.config.sync_listen
        if not listen:
            return None
        host, _, port = listen.rpartition(":")
        return host.strip("[]"), int(port)

    async def start(self) -> None:
        """Serve shared databases on ``sync_listen`` and replicate imported ones."""
        listen = self._listen()
        if listen is None:
            return
        cfg = self.config
        tls = None
        if cfg.sync_tls_cert is not None and cfg.sync_tls_key is not None:
            tls = server_context(cfg.sync_tls_cert, cfg.sync_tls_key)  # ConfigError: say so
        public = [address_from_url(cfg.sync_public_url)] if cfg.sync_public_url else []
        self.server = SyncServer(
            self.ledger,
            host=listen[0],
            port=listen[1],
            serving=self.serving,
            ssl_context=tls,
            public_addresses=public,
        )
        try:
            await self.server.start()
        except OSError as exc:
            self.server = None
            raise BackendError(
                f"cannot listen on sync_listen {cfg.sync_listen}: {exc.strerror}"
            ) from exc
        self.replicator = self.new_replicator()
        await self.replicator.start()
        log.info("sync server on %s", self.server.address)

    async def stop(self) -> None:
        if self.replicator is not None:
            await self.replicator.close()
            self.replicator = None
        if self.server is not None:
            await self.server.stop()
            self.server.close()
            self.server = None

    def counters(self) -> dict[str, int]:
        """Entries sent, received and refused by the server and the replicator together."""
        totals = {"sent": 0, "received": 0, "refused": 0}
        for part in (self.server, self.replicator):
            if part is not None:
                for name in totals:
                    totals[name] += int(getattr(part.counters, name))
        return totals

    def requests_refused(self) -> dict[str, int]:
        """Sync requests the server refused, by reason: ``misdirected`` (signed for another
        server: a peer relaying another's requests) and ``auth`` (a bad signature, time or
        nonce, or an unknown key)."""
        counters = self.server.counters if self.server is not None else None
        if counters is None:
            return {"auth": 0, "misdirected": 0}
        misdirected = counters.misdirected
        return {"auth": counters.requests_refused - misdirected, "misdirected": misdirected}

    def withdrawn(self, db: str) -> str | None:
        """Why this peer must not write to ``db`` any more (its remote refuses this peer's
        key), or None; the registry asks it for delegated writes (``Registry``)."""
        return self.replicator.withdrawn(db) if self.replicator is not None else None

    def new_replicator(self) -> Replicator:
        cfg = self.config
        return Replicator(
            self.ledger,
            self.key,
            import_timeout=cfg.sync_import_timeout_s,
            ssl_context=client_context(cfg.sync_ca_file),
            allow_plain_http=cfg.sync_allow_plain_http,
            allow_private_peers=cfg.sync_allow_private_peers,
        )

    async def forget_remote(self, db: str) -> None:
        """Stop syncing ``db`` with any remote (now, and after restarts)."""
        if self.replicator is not None:
            await self.replicator.remove_remote(db)
        else:
            await Remotes(self.ledger).remove(db)

    def public_address(self) -> str:
        """The peer address tickets advertise: ``sync_public_url``, else ``sync_listen``
        (with the bound port); an InputError saying what to set when neither is reachable."""
        if self.config.sync_public_url:
            return address_from_url(self.config.sync_public_url)
        listen = self._listen()
        if listen is None:
            raise InputError("sync is off: set sync_listen in the config to share banks")
        host, port = listen
        if self.server is not None:
            port = self.server.port
        if is_wildcard(host):
            raise InputError(
                f"sync_listen {self.config.sync_listen} binds every interface, which is no "
                "address other peers can reach: set sync_public_url in the config (or "
                "CHAZBOT_SYNC_PUBLIC_URL in Docker) to https://<host other peers reach>:"
                f"{port}, then share again"
            )
        tls = self.config.sync_tls_cert is not None
        return format_address(host, port, "https" if tls else "http")


class Sharing:
    """Serving this peer's banks and importing others' (see the module docstring)."""

    def __init__(
        self, sync: SyncService, ledger: Ledger, registry: Registry, serving: Serving
    ) -> None:
        self.sync = sync
        self.ledger = ledger
        self.registry = registry
        self.serving = serving

    async def share(self, db: str) -> str:
        """Serve ``db`` to peers holding a key on it; return its ticket."""
        address = self.sync.public_address()
        await self.serving.share(db)
        return format_ticket(db, [address])

    async def unshare(self, db: str) -> None:
        if not await self.serving.unshare(db):
            raise NotFound("that bank is not shared")

    async def shared(self) -> list[str]:
        """The databases served here."""
        return await self.serving.shared()

    async def drop(self, db: str) -> None:
        """A bank deleted here: stop serving it and stop syncing it (idempotent)."""
        await self.serving.unshare(db)
        await self.sync.forget_remote(db)

    async def import_bank(self, ticket: str, permission: str, name: str | None) -> Imported:
        """Import a bank from another peer's ticket (asking its owner when needed)."""
        parsed = parse_ticket(ticket)
        if name is not None:
            check_name(name)
        existing = await self.registry.by_db(parsed.db)
        if existing is not None:
            raise ConflictError(
                f"that database is here already as {existing.kind} {existing.name!r}"
            )
        running = self.sync.replicator
        replicator = running or self.sync.new_replicator()
        try:
            result = await replicator.import_db(parsed, permission)
        finally:
            if replicator is not running:
                await replicator.close()

        if result.status == "pending":
            return Imported("pending", permission, parsed.db, request_id=result.request_id)
        if result.status != "done":
            raise PermissionDenied("the owner rejected this peer's access request")
        meta = await self.ledger.fields(result.db, "meta")
        chosen = name or str(meta.get("name") or "")
        if not chosen:
            return Imported("unnamed", permission, result.db)
        check_name(chosen)
        if await self.registry.get("bank", chosen) or await self.registry.get("agent", chosen):
            return Imported("name_taken", permission, result.db, chosen)
        await self.registry.add("bank", chosen, result.db, {"imported": True})
        return Imported("done", permission, result.db, chosen)

    async def pending_requests(self, shown: int = 10) -> PendingRequests:
        """Pending requests: how many per database, and the newest ``shown`` of them."""
        counts = await self.serving.pending_counts()
        labels = {db: await self.label(db) for db in counts}
        per_db = [(labels[db], n) for db, n in sorted(counts.items(), key=lambda kv: -kv[1])]
        newest = list(reversed(await self.serving.requests(newest=shown))) if counts else []
        return PendingRequests(sum(counts.values()), per_db, newest, labels)

    async def sync_pairs(self) -> list[SyncPair]:
        """Every (database, remote) pair this peer syncs: its cursors, how it is doing and
        when it last pulled and pushed; with sync off, the pairs that wait for it."""
        replicator = self.sync.replicator
        if replicator is not None:
            return [
                SyncPair(
                    await self.label(p.db),
                    p.address,
                    p.pulled,
                    p.pushed,
                    "failing" if p.failing else "ok",
                    p.last_error or "",
                    p.last_pull,
                    p.last_push,
                )
                for p in replicator.status()
            ]
        return [
            SyncPair(await self.label(c.db), c.address, c.pulled, c.pushed, "off")
            for c in await SyncCursors(self.ledger).list()
        ]

    async def requests_of(self, db: str) -> list[AccessRequest]:
        """Every access request for ``db`` (any status), oldest first."""
        return await self.serving.requests(db, status=None)

    async def label(self, db: str) -> str:
        """A database as a person reads it: its bank or agent name, else its id cut short."""
        hosted = await self.registry.by_db(db)
        return hosted.name if hosted else db[:19] + "…"

    async def decide_request(self, number: int, approve: bool) -> AccessRequest:
        """Approve (with an admin key this peer holds on the database) or reject a request."""
        if approve:
            request = await self.serving.request(number)
            admin = await admin_key_for(self.ledger, self.registry, request.db)
            return await self.serving.approve(number, admin)
        return await self.serving.reject(number)


__all__ = ["Sharing", "SyncService"]
