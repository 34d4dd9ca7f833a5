"""Knowledge records (the three kinds) and their shared base.

Records are frozen: the KB, indexes and caches share them across stages and
browser sessions, so nobody may mutate one in place. Unknown fields are kept
(``extra="allow"``) so a user's JSONL round-trips without loss.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

Kind = Literal["docs_chunk", "api_mapping", "label_prototype"]


class BaseRecord(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    id: str = Field(min_length=1)
    kind: Kind


class DocsChunk(BaseRecord):
    """One section (or one code-bearing part of a long section) of a docs page."""

    kind: Literal["docs_chunk"] = "docs_chunk"
    doc_path: str  # RST path relative to the corpus root
    source: str  # short label, e.g. "first_2d_game/coding_the_player", "class/AnimatedSprite2D"
    title: str  # page title
    section: str  # heading path joined with " > "; a split section ends with " (part N)"
    content: str = ""  # plain text, :ref: roles rendered to their text
    code_blocks: list[str] = Field(default_factory=list)  # GDScript only, never C#
    api_symbols: list[str] = Field(default_factory=list)  # e.g. "AnimatedSprite2D.play"


class ApiMapping(BaseRecord):
    """One class-reference member, or one Godot 3 -> 4 rename."""

    kind: Literal["api_mapping"] = "api_mapping"
    source_api: str  # e.g. "AnimatedSprite2D.play", or "KinematicBody2D" for a rename
    source_pattern: str  # Python regex that finds a use of the API in GDScript
    match_terms: list[str] = Field(default_factory=list)
    required_when_seen_in_code: list[str] = Field(default_factory=list)
    before_code: str | None = None  # Godot 3 spelling, where one exists
    after_code: str | None = None  # Godot 4 spelling
    doc_path: str | None = None
    source: str = ""  # e.g. "class/AnimatedSprite2D" or "migrating/upgrading_to_godot_4"
    description: str = ""


class LabelPrototype(BaseRecord):
    """A hand-written label: what a chunk is about, with prototype GDScript."""

    kind: Literal["label_prototype"] = "label_prototype"
    label: str
    description: str
    prototype_code: str
    match_terms: list[str] = Field(default_factory=list)
    source: str = ""  # "label/<label>"
    doc_path: str | None = None


Record = Annotated[DocsChunk | ApiMapping | LabelPrototype, Field(discriminator="kind")]
RECORD_ADAPTER: TypeAdapter[DocsChunk | ApiMapping | LabelPrototype] = TypeAdapter(Record)
AnyRecord = DocsChunk | ApiMapping | LabelPrototype


def record_line(record: AnyRecord) -> str:
    """The canonical JSON line of a record: sorted keys, non-ASCII kept. The KB files hold these lines,
    the content hash is taken over them, and caches key on them."""
    return json.dumps(record.model_dump(mode="json"), ensure_ascii=False, sort_keys=True)
