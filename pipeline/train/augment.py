"""Augmentations that make docs code look like user code.

Docs blocks are tidy: commented, tutorial names, one indentation style. User code
renames things, drops comments, writes ``&"action"`` StringNames and indents with
tabs or spaces. Each function is pure and takes its randomness from the caller's
``random.Random``, so a recipe seed reproduces every query byte for byte.
"""

from __future__ import annotations

import random
import re
import textwrap
from functools import lru_cache
from typing import Any

from pipeline.evidence import strip_comments

# Names tutorials use, and what people write instead.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "velocity": ("vel", "motion", "move_velocity"),
    "direction": ("dir", "move_dir", "input_dir"),
    "speed": ("move_speed", "max_speed", "spd"),
    "screen_size": ("viewport_size", "bounds", "play_area"),
    "delta": ("dt", "_delta", "step"),
    "target": ("goal", "target_pos", "dest"),
    "player": ("hero", "pc", "character"),
    "enemy": ("foe", "mob", "monster"),
    "health": ("hp", "life", "hit_points"),
    "damage": ("dmg", "amount", "hit"),
    "timer": ("t", "cooldown", "clock"),
    "score": ("points", "total_score", "pts"),
    "event": ("ev", "e", "input_event"),
    "body": ("other", "collider", "hit_body"),
    "result": ("res", "hit", "out"),
    "node": ("n", "child", "item"),
    "scene": ("packed", "level", "prefab"),
    "mob": ("enemy", "creep", "baddie"),
    "collision": ("col", "hit", "contact"),
    "input_vector": ("move_input", "axis", "dir_input"),
}
_WORD = re.compile(r"[A-Za-z_]\w*")
_SHORT_STRING = re.compile(r'(?<![&^\w"])"([A-Za-z_][\w]{0,30})"')


@lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter_gdscript
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_gdscript.language()))


def declared_names(code: str) -> list[str]:
    """Names the code itself declares (vars, consts, parameters, loop variables), in order.

    Only these are safe to rename: engine members and API calls must keep their names.
    """
    tree = _parser().parse(code.encode("utf-8"))
    out: dict[str, None] = {}
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in ("variable_statement", "const_statement"):
            name = node.child_by_field_name("name") or next((c for c in node.children if c.type == "name"), None)
            if name is not None:
                out[name.text.decode("utf-8", "replace")] = None
        elif node.type in ("typed_parameter", "default_parameter", "typed_default_parameter"):
            ident = next((c for c in node.children if c.type == "identifier"), None)
            if ident is not None:
                out[ident.text.decode("utf-8", "replace")] = None
        elif node.type == "parameters":
            for c in node.children:
                if c.type == "identifier":
                    out[c.text.decode("utf-8", "replace")] = None
        elif node.type == "for_statement":
            ident = next((c for c in node.children if c.type == "identifier"), None)
            if ident is not None:
                out[ident.text.decode("utf-8", "replace")] = None
        stack.extend(reversed(node.children))
    return [n for n in out if not n.startswith("_") or n == "_delta"]


def _new_name(name: str, rng: random.Random, taken: set[str]) -> str:
    options = [*SYNONYMS.get(name, ()), f"my_{name}", f"{name}_value", f"current_{name}"]
    if "_" in name:
        options.append("".join(p[:1] for p in name.split("_") if p) + "_" + name.split("_")[-1])
    rng.shuffle(options)
    return next((o for o in options if o not in taken and o != name), f"{name}_2")


def rename_locals(code: str, rng: random.Random, share: float = 0.7) -> str:
    """Rename a random share of the declared names, consistently, outside strings and comments.

    A name after a ``.`` is a member of something else and stays; so does anything in a string.
    """
    names = declared_names(code)
    if not names:
        return code
    picked = [n for n in names if rng.random() < share] or [rng.choice(names)]
    taken = set(_WORD.findall(code))
    mapping: dict[str, str] = {}
    for n in picked:
        mapping[n] = _new_name(n, rng, taken)
        taken.add(mapping[n])
    out: list[str] = []
    for line in code.splitlines(keepends=True):
        out.append(_rename_line(line, mapping))
    return "".join(out)


def _rename_line(line: str, mapping: dict[str, str]) -> str:
    # Split off strings and a trailing comment so they are left as written.
    parts = re.split(r'("(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|#.*$)', line)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"(?<![\w.$%])([A-Za-z_]\w*)",
                          lambda m: mapping.get(m.group(1), m.group(1)), parts[i])
    return "".join(parts)


def drop_comments(code: str) -> str:
    lines = [ln.rstrip() for ln in strip_comments(code).splitlines()]
    kept = [ln for ln in lines if ln.strip()]
    return "\n".join(kept) + "\n" if kept else code


def string_names(code: str, rng: random.Random, share: float = 0.7) -> str:
    """``"move_right"`` → ``&"move_right"`` (Godot 4 StringName literals) for some identifier-like strings."""
    return _SHORT_STRING.sub(lambda m: ("&" if rng.random() < share else "") + m.group(0), code)


def swap_indentation(code: str) -> str:
    """Tabs → four spaces, or four-space indents → tabs, whichever the code does not use."""
    lines = code.splitlines(keepends=True)
    if any(ln.startswith("\t") for ln in lines):
        return "".join(re.sub(r"^\t+", lambda m: "    " * len(m.group(0)), ln) for ln in lines)
    return "".join(re.sub(r"^(?: {4})+", lambda m: "\t" * (len(m.group(0)) // 4), ln) for ln in lines)


def crop_windows(n_lines: int, anchor: tuple[int, int], rng: random.Random, count: int,
                 lo: int = 5, hi: int = 30) -> list[tuple[int, int]]:
    """``count`` distinct windows [start, end) of lo..hi lines that overlap the anchor span."""
    if n_lines <= lo:
        return [(0, n_lines)]
    out: set[tuple[int, int]] = set()
    a0, a1 = anchor
    for _ in range(count * 6):
        size = rng.randint(lo, min(hi, n_lines))
        first = max(0, a0 - size + 1)
        last = min(a1 - 1, n_lines - size)
        if last < first:
            first = last = max(0, min(a0, n_lines - size))
        start = rng.randint(first, last)
        out.add((start, start + size))
        if len(out) >= count:
            break
    return sorted(out)


def dedent_crop(lines: list[str]) -> str:
    return textwrap.dedent("".join(lines)).strip("\n") + "\n"
