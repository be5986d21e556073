"""``RemoteService``: the read side of ``MemoryService``, through a running hub.

The CLI and the TUI use it when a hub owns the store, so they see exactly what
the hub serves. Methods and results match ``MemoryService``; hub errors come
back as ``MemviewerError`` with the error code of docs/cli.md.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memviewer.errors import INTERNAL, MemviewerError
from memviewer.events import EventRecord
from memviewer.wire import fastjson, protocol, tls
from memviewer.wire.syncclient import HubUnavailable, RpcConnection

if TYPE_CHECKING:
    from memviewer.config import Settings
    from memviewer.recall_log import RecordAs


def hub_address(settings: Settings) -> tls.HubAddress | None:
    """The remote hub ``settings`` name (``hub``, ``MEMVIEWER_HUB``) with its token and CA,
    or None for the local one. Raises ``MemviewerError`` for a malformed address."""
    if not settings.hub:
        return None
    token = settings.token.get_secret_value() if settings.token is not None else None
    try:
        return tls.parse_hub(
            settings.hub, token=token, token_file=settings.token_file, ca_file=settings.tls_ca
        )
    except tls.HubAccessError as exc:
        raise MemviewerError(exc.code, exc.message, hint=exc.hint) from None


def open_remote(
    addr: tls.HubAddress, *, client: str = "memviewer.remote", timeout: float = 10.0
) -> tuple[RpcConnection, dict[str, Any]]:
    """A connection to a remote hub that has said ``hello`` with the token, and its answer.
    Every failure is one ``MemviewerError`` with its own code (docs/cli.md, "Errors")."""
    try:
        conn = RpcConnection(addr, timeout=timeout, decode=fastjson.decode_answer)
    except tls.HubAccessError as exc:
        raise MemviewerError(exc.code, exc.message, hint=exc.hint) from None
    except OSError as exc:
        raise MemviewerError(INTERNAL, f"hub unavailable: {exc}", hint="is the hub running?") from None
    try:
        hello = conn.call(
            protocol.HELLO, {"protocol": protocol.PROTOCOL_VERSION, "role": "reader", "client": client}
        )
    except tls.HubAccessError as exc:
        conn.close()
        raise MemviewerError(exc.code, exc.message, hint=exc.hint) from None
    except HubUnavailable as exc:
        conn.close()
        raise MemviewerError(INTERNAL, f"hub unavailable: {exc}") from None
    except protocol.RpcError as err:
        conn.close()
        raise MemviewerError(err.app_code, err.message, data=err.data) from None
    return conn, hello


def _record_param(record: RecordAs | None) -> dict[str, Any]:
    return {} if record is None else {"record": record.to_param()}


class RemoteService:
    """A small synchronous client; thread-safe (one request at a time)."""

    def __init__(
        self,
        socket_path: str | Path | tls.HubAddress,
        *,
        timeout: float = 120.0,
        client: str = "memviewer.remote",
    ) -> None:
        # A remote hub (``tls://``) is kept as its address: its token goes in hello.
        self.socket_path: Path | tls.HubAddress = (
            socket_path if isinstance(socket_path, tls.HubAddress) else Path(socket_path)
        )
        self.timeout = timeout
        self.client = client
        self._conn: RpcConnection | None = None
        self._hello: dict[str, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def adopt(
        cls,
        socket_path: str | Path | tls.HubAddress,
        conn: RpcConnection,
        hello: dict[str, Any],
        *,
        timeout: float = 120.0,
        client: str = "memviewer.remote",
    ) -> RemoteService:
        """A reader over a connection that has already said ``hello`` (the CLI's probe), so a
        command opens one connection, not two. The reader owns it from here."""
        remote = cls(socket_path, timeout=timeout, client=client)
        conn.settimeout(timeout)
        remote._conn, remote._hello = conn, dict(hello)
        return remote

    def _connect(self) -> RpcConnection:
        conn = RpcConnection(self.socket_path, timeout=self.timeout, decode=fastjson.decode_answer)
        try:
            self._hello = conn.call(
                protocol.HELLO,
                {"protocol": protocol.PROTOCOL_VERSION, "role": "reader", "client": self.client},
            )
        except BaseException:
            conn.close()
            raise
        return conn

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One request; reconnects once if the hub restarted since the last call."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    if self._conn is None:
                        self._conn = self._connect()
                    return self._conn.call(method, params or {})
                except tls.HubAccessError as exc:
                    raise MemviewerError(exc.code, exc.message, hint=exc.hint) from None
                except HubUnavailable as exc:
                    if self._conn is not None:
                        self._conn.close()
                        self._conn = None
                    if attempt == 2:
                        raise MemviewerError(INTERNAL, f"hub unavailable: {exc}") from None
                except protocol.RpcError as err:
                    raise MemviewerError(err.app_code, err.message, data=err.data) from None
        raise AssertionError("unreachable")

    # -- the MemoryService read API ------------------------------------------------
    def hello(self) -> dict[str, Any]:
        """The hub's ``hello`` answer (server_version, protocol, last_seq, frame_limit, pid)."""
        with self._lock:
            if self._conn is None:
                try:
                    self._conn = self._connect()
                except tls.HubAccessError as exc:
                    raise MemviewerError(exc.code, exc.message, hint=exc.hint) from None
                except protocol.RpcError as err:
                    raise MemviewerError(err.app_code, err.message, data=err.data) from None
                except HubUnavailable as exc:
                    raise MemviewerError(INTERNAL, f"hub unavailable: {exc}") from None
            return dict(self._hello)

    @property
    def last_seq(self) -> int:
        return int(self.call(protocol.EVENTS, {"from_seq": 0, "limit": 1})["last_seq"])

    def sessions(
        self,
        *,
        scope: str | None = None,
        scope_id: str | None = None,
        filter: str | None = None,
        sort: str = "last_seen",
        descending: bool = True,
        limit: int | None = None,
        offset: int = 0,
    ) -> dict[str, Any]:
        params = {
            "scope": scope,
            "scope_id": scope_id,
            "filter": filter,
            "sort": sort,
            "descending": descending,
            "limit": limit,
            "offset": offset,
        }
        return cast("dict[str, Any]", self.call(protocol.SESSIONS, params))

    def session(self, session_id: str) -> dict[str, Any]:
        return cast("dict[str, Any]", self.call(protocol.SESSION, {"session_id": session_id}))

    def search(
        self,
        query: str | None = None,
        *,
        session_id: str | None = None,
        around: int | str | None = None,
        limit: int = 5,
        window: int = 5,
        scope: str | None = None,
        scope_id: str | None = None,
        record: RecordAs | None = None,
    ) -> dict[str, Any]:
        """``record`` names the front end for the hub's recall log; without one the hub
        records the search as its own (source ``hub``)."""
        params = {
            "query": query,
            "session_id": session_id,
            "around": around,
            "limit": limit,
            "window": window,
            "scope": scope,
            "scope_id": scope_id,
        }
        return cast("dict[str, Any]", self.call(protocol.SEARCH, {**params, **_record_param(record)}))

    def recall(self, query: str, *, record: RecordAs | None = None, **params: Any) -> dict[str, Any]:
        return cast(
            "dict[str, Any]", self.call(protocol.RECALL, {"query": query, **params, **_record_param(record)})
        )

    def compare(self, query: str, params: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
        """A and B, each a recall the hub answers (``recall.compare``)."""
        from memviewer.contract.compare import compare

        return compare(self.recall, query, params, overrides)

    def stats(self) -> dict[str, Any]:
        return cast("dict[str, Any]", self.call(protocol.STATS))

    def events(
        self,
        from_seq: int = 0,
        limit: int = 1000,
        kinds: list[str] | None = None,
        session_id: str | None = None,
    ) -> list[EventRecord]:
        result = self.call(
            protocol.EVENTS, {"from_seq": from_seq, "limit": limit, "kinds": kinds, "session_id": session_id}
        )
        return [EventRecord.from_dict(e) for e in result["events"]]

    def publish(self, commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Apply commands through the hub (durable when this returns); one result each."""
        return cast("list[dict[str, Any]]", self.call(protocol.PUBLISH, {"commands": commands})["results"])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> RemoteService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
