"""The Matrix transport: chazbot as a matrix-nio bot, split by concern.

- ``rules``: the pure decisions (who is answered, what a message asks for, what a reply looks
  like), plain functions over plain data, no nio: tested without a homeserver;
- ``client``: the nio client (429 waits capped) and how its answers read in a log line;
- ``credentials``: the transport's own peer-local table of secrets (``CREDENTIALS``);
- ``login``: logging in, and the device, token and e2e pickle key kept in it;
- ``state``: the sync token, handled event ids and pending jobs (in ``state_tables``, the
  transport's own declared tables), committed before any answer
  starts; a job leaves the pending table only when it is done (a crash loses none);
- ``sync``: the long-poll sync loop, paging back limited timelines, e2e housekeeping, and the
  supervisor that restarts it with backoff;
- ``routing``: which events become jobs (``rules`` decides), one queue per room;
- ``revisions``: redactions and edits as jobs (they forget or replace captured rows);
- ``sending``: sends, joins and typing notices, retried by the shared policy of
  ``chazbot.backends.retry``;
- ``bot``: ``MatrixBot``, wiring them and turning a job into a command or an agent turn.

Each joined room is one session (``matrix:<room_id>``). Never twice, never lost, never old:
see ``state``; replies carry a transaction id derived from the answered event, so a retried send
is deduplicated by the homeserver.

The package re-exports nothing: its feature table (``credentials``) is read by ``chazbot cmd``
and ``verify``, which must not load matrix-nio for it (``from ...matrix.bot import MatrixBot``).
"""
