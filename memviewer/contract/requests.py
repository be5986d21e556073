"""``SearchParams`` and ``RecallParams``: the one declaration of what search and recall take.

Each field carries its type, default, bounds (``ge``/``le``, ``max_length``) and description;
the CLI's options, the hub's check, the MCP tools' schemas and the viewer's fields are derived
from these (``int_bounds``, ``model_json_schema()``), so a bound changed here changes everywhere.

``from_mapping`` validates a caller's mapping and turns pydantic's ``ValidationError`` into
``MemviewerError(invalid_argument)`` naming the bad key, with the wording of
``contract.checks`` (the same messages the recall layers give).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from memviewer.contract.checks import (
    AS_OF_FORMS,
    MAX_QUERY_CHARS,
    QUERY_HINT,
    int_error,
    too_long_message,
    whole_number,
)
from memviewer.errors import INVALID_ARGUMENT, MemviewerError

_OWN = "memviewer"  # the error type of a refusal whose message is written here, not by pydantic


def _refuse(message: str) -> PydanticCustomError:
    return PydanticCustomError(_OWN, message.replace("{", "{{").replace("}", "}}"))


def _opt_text(value: Any) -> Any:
    """An empty string means "not given" (CLI options, MCP's ``""`` defaults)."""
    return None if value == "" else value


def _as_of(value: Any) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float | str)):
        raise _refuse(f"as_of must be {AS_OF_FORMS}")
    return value


def _around(value: Any) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | str)):
        raise _refuse("around must be a message index (an integer or its digits)")
    return value


def _recall_query(value: Any) -> Any:
    if not isinstance(value, str) or not value.strip():
        raise _refuse("query must be a non-empty string")
    return value


Whole = Annotated[int, BeforeValidator(whole_number)]
OptText = Annotated[str | None, BeforeValidator(_opt_text)]
RecallMode = Literal["hierarchical", "flat"]


class _Request(BaseModel):
    """Strict (JSON ``true`` is not 1, 7.0 is not 7), closed (unknown keys are refused),
    frozen; None for a field that has a default means the default."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    #: ``unknown <what> parameters`` in the refusal of an unknown key.
    what: ClassVar[str] = "request"

    @model_validator(mode="before")
    @classmethod
    def _none_is_default(cls, raw: Any) -> Any:
        if not isinstance(raw, Mapping):
            return raw
        fields = cls.model_fields
        return {
            k: v
            for k, v in raw.items()
            if not (v is None and k in fields and not _nullable(fields[k]) and not fields[k].is_required())
        }

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> Self:
        """Validate once; raises ``MemviewerError(invalid_argument)`` naming the bad key."""
        unknown = set(raw) - set(cls.model_fields)
        if unknown:
            raise MemviewerError(INVALID_ARGUMENT, f"unknown {cls.what} parameters: {sorted(unknown)}")
        try:
            return cls.model_validate(dict(raw))
        except ValidationError as exc:
            raise refusal(cls, exc) from None


class SearchParams(_Request):
    """Keyword search: discovery (``query``), scroll (``session_id``) or browse (neither)."""

    what: ClassVar[str] = "search"

    query: str | None = Field(
        None, max_length=MAX_QUERY_CHARS, description="words to find (discovery); none: scroll or browse"
    )
    session_id: OptText = Field(None, description="scroll this session (or search inside it)")
    around: Annotated[int | str | None, BeforeValidator(_around)] = Field(
        None, description="anchor message index in the session scrolled (default: most recent)"
    )
    limit: Whole = Field(5, ge=1, le=1000, description="sessions to return")
    window: Whole = Field(5, ge=0, le=500, description="messages either side of a hit or anchor")
    scope: OptText = Field(None, description="only sessions of this scope (user, agent, …)")
    scope_id: OptText = Field(None, description="only sessions of this scope id")

    def as_kwargs(self) -> dict[str, Any]:
        return self.model_dump()


class RecallParams(_Request):
    """What a caller may set for recall. Weights and tuning are not here on purpose: they
    come from settings (and the evaluators), never from a socket or MCP client."""

    what: ClassVar[str] = "recall"

    query: Annotated[str, BeforeValidator(_recall_query)] = Field(
        min_length=1, max_length=MAX_QUERY_CHARS, description="the question to recall memory for"
    )
    scope: OptText = Field(None, description="only this scope (user, agent, …); default every scope")
    scope_id: OptText = Field(None, description="only this scope id (a user id, an agent name)")
    top_sessions: Whole = Field(5, ge=1, le=1000, description="K: sessions kept by Stage 1")
    chunks_per_session: Whole = Field(3, ge=1, le=1000, description="M: turns kept per session")
    top_k: Whole = Field(10, ge=1, le=1000, description="results returned")
    mode: Annotated[RecallMode, BeforeValidator(lambda v: v or "hierarchical")] = Field(
        "hierarchical", description="hierarchical (two stages) or flat (one turn query, for comparison)"
    )
    as_of: Annotated[int | float | str | None, BeforeValidator(_as_of)] = Field(
        None,
        description="when the question is asked (ISO 8601, epoch seconds or '6 days ago'; default now): "
        "only turns up to then are recalled, and 'a week ago' in the query counts from it",
    )
    rerank: bool | None = Field(None, description="re-score with the configured reranker (default: if any)")

    @model_validator(mode="before")
    @classmethod
    def _query_given(cls, raw: Any) -> Any:
        if isinstance(raw, Mapping) and "query" not in raw:
            raise _refuse("query must be a non-empty string")
        return raw

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``Reader.recall`` (without the query)."""
        return {k: v for k, v in self.model_dump(exclude={"query"}).items() if v is not None}


#: The recall modes (``RecallParams.mode``), in the order the errors list them.
RECALL_MODES: tuple[str, ...] = get_args(RecallMode)


def _nullable(field: FieldInfo) -> bool:
    return type(None) in get_args(field.annotation) or field.annotation is type(None)


def int_bounds(model: type[BaseModel], name: str) -> tuple[int, int]:
    """``(ge, le)`` of an integer field (``ValueError`` for a field without both)."""
    lo = hi = None
    for meta in model.model_fields[name].metadata:
        lo = getattr(meta, "ge", lo)
        hi = getattr(meta, "le", hi)
    if not isinstance(lo, int) or not isinstance(hi, int):
        raise ValueError(f"{model.__name__}.{name} is not a bounded integer")
    return lo, hi


def int_fields(model: type[BaseModel]) -> dict[str, tuple[int, int]]:
    """Every bounded integer field of ``model`` and its ``(ge, le)``."""
    return {n: int_bounds(model, n) for n, f in model.model_fields.items() if f.annotation is int}


def default(model: type[BaseModel], name: str) -> Any:
    return model.model_fields[name].default


def max_length(model: type[BaseModel], name: str) -> int | None:
    for meta in model.model_fields[name].metadata:
        if getattr(meta, "max_length", None) is not None:
            return int(meta.max_length)
    return None


def refusal(model: type[BaseModel], exc: ValidationError) -> MemviewerError:
    """The first error of ``exc`` as ``MemviewerError(invalid_argument)``, worded from the
    field's declaration (its bounds, its choices) as the recall layers word it."""
    err = exc.errors(include_url=False)[0]
    kind, value = err["type"], err.get("input")
    name = str(err["loc"][0]) if err["loc"] else ""
    field = model.model_fields.get(name)
    if kind == _OWN or field is None:
        return MemviewerError(INVALID_ARGUMENT, err["msg"])
    if field.annotation is int:
        lo, hi = int_bounds(model, name)
        return int_error(name, value, lo, hi)
    if kind == "string_too_long":
        most = max_length(model, name) or 0
        hint = QUERY_HINT if name == "query" else None
        data = {"hint": hint} if hint else None
        return MemviewerError(INVALID_ARGUMENT, too_long_message(name, len(str(value)), most), data=data)
    if kind == "literal_error":
        choices = get_args(field.annotation)
        return MemviewerError(INVALID_ARGUMENT, f"{name} must be one of {choices}, not {value!r}")
    if kind == "bool_type":
        return MemviewerError(INVALID_ARGUMENT, f"{name} must be true or false")
    if kind == "string_type":
        return MemviewerError(INVALID_ARGUMENT, f"{name} must be a string, not {type(value).__name__}")
    return MemviewerError(INVALID_ARGUMENT, f"{name}: {err['msg']}")
