"""``memviewer token create|list|revoke``: the bearer tokens of the hub's TCP listener.

They live in the store (hashed), so every hub sharing it knows them; a revoked token is
refused at the next request of a connection that holds it (docs/protocol.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from memviewer.commands.common import emit_json, fail_maybe_json, print_table, settings_of
from memviewer.errors import MemviewerError

if TYPE_CHECKING:
    from memviewer.store.db import Store


@contextmanager
def _store(ctx: click.Context, as_json: bool) -> Iterator[Store]:
    from memviewer.service import open_store

    try:
        store = open_store(settings_of(ctx).home_path)
    except MemviewerError as exc:
        fail_maybe_json(as_json, exc.message, hint=exc.hint, code=exc.code)
    try:
        yield store
    finally:
        store.close()


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


@click.group("token")
def token_group() -> None:
    """Bearer tokens for `serve --listen` (stored hashed; the secret is shown once)."""


@token_group.command("create")
@click.argument("name")
@click.option(
    "--scope",
    type=click.Choice(["publish", "read", "admin"]),
    required=True,
    help="publish: agents' publishers; read: readers, subscribe and tail; admin: everything",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def create_cmd(ctx: click.Context, name: str, scope: str, as_json: bool) -> None:
    """Make a token NAME and print its secret (once: only its hash is kept)."""
    from memviewer.wire.auth import create_token

    with _store(ctx, as_json) as store:
        try:
            made = create_token(store, name, scope)
        except ValueError as exc:
            fail_maybe_json(as_json, str(exc), code="invalid_argument")
    if as_json:
        emit_json(made)
        return
    click.echo(made["token"])
    click.echo(f"token {name!r} (scope {scope}) created; this is the only time its secret is shown", err=True)


@token_group.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool) -> None:
    """Every token: name, scope, created, last used, revoked (never the secret)."""
    from memviewer.wire.auth import list_tokens

    with _store(ctx, as_json) as store:
        rows = list_tokens(store)
    if as_json:
        emit_json({"tokens": rows})
        return
    if not rows:
        click.echo("no tokens (memviewer token create NAME --scope publish|read|admin)")
        return
    print_table(
        ["name", "scope", "created", "last used", "revoked"],
        [
            [r["name"], r["scope"], _when(r["created_at"]), _when(r["last_used_at"]), _when(r["revoked_at"])]
            for r in rows
        ],
    )


@token_group.command("revoke")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def revoke_cmd(ctx: click.Context, name: str, as_json: bool) -> None:
    """Revoke NAME: every hub sharing this store refuses it from its next request on."""
    from memviewer.wire.auth import revoke_token

    with _store(ctx, as_json) as store:
        done = revoke_token(store, name)
    if done is None:
        fail_maybe_json(as_json, f"no token named {name!r}", hint="memviewer token list", code="not_found")
    if as_json:
        emit_json({"name": name, "revoked": True, "already": not done})
        return
    click.echo(f"token {name!r} {'revoked' if done else 'was already revoked'}")


COMMANDS = (token_group,)
