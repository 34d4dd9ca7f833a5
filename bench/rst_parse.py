"""docutils against the KB's RST toolkit (pipeline/kb/rsttext.py) on every RST file of the Godot docs.

python -m bench.rst_parse   -> bench/results/rst_parse.json

The job the KB needs from RST: the section headings and the code blocks of each page. Timed on the
same 1,337 files, medians of several runs:

- docutils' RST parser building a doctree (``Parser.parse`` into a new document: the cheapest way
  to a doctree, without the publisher's transforms or a writer), then the sections and literal blocks
  read from it. Godot's docs use Sphinx directives and roles (``.. tabs::``, ``.. code-tab::``,
  ``:ref:``, ``:kbd:`` ...) that plain docutils reports as errors and keeps as error nodes; to be fair,
  the timed run registers small stand-ins for them (a container that parses its body, a literal block
  for ``code-tab``, an inline literal for the roles), as Sphinx would. The error count of plain
  docutils is reported once, untimed against the toolkit.
- the toolkit: heading finder, section spans, and code directives / ``::`` literal blocks with
  their dedented text.
- for context, the KB's full readers (rst.parse_page + classref.parse_class), which also render
  inline markup and chunk the text.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.common import save, timeit
from pipeline import config
from pipeline.kb import classref, rst
from pipeline.kb import rsttext as rt

# Sphinx (or Godot's own Sphinx extensions) define these; docutils does not.
SPHINX_ROLES = ("ref", "doc", "kbd", "abbr", "button", "menu", "ui", "inspector", "download")
SPHINX_CONTAINERS = ("tabs", "toctree")
SPHINX_TITLED_CONTAINERS = ("tab", "seealso", "only", "video")
CODE_DIRECTIVES = ("code-block", "code", "sourcecode", "code-tab")


@dataclass(frozen=True)
class Extract:
    sections: int
    code_blocks: int
    errors: int = 0


def corpus_files(docs: Path) -> list[tuple[str, str]]:
    return [(p.relative_to(docs).as_posix(), p.read_text(encoding="utf-8")) for p in sorted(docs.rglob("*.rst"))]


# --- the toolkit -------------------------------------------------------------------------------


def toolkit_extract(text: str) -> Extract:
    lines = text.split("\n")
    sections = len(rt.section_spans(lines))
    code: list[str] = []
    for i, line in enumerate(lines):
        d = rt.directive(line)
        if d is not None:
            if d.name in CODE_DIRECTIVES:
                body, _ = rt.indented_block(lines, i + 1, d.column)
                code.append(rt.code_text(rt.skip_options(body)))
        elif line.rstrip().endswith("::") and not line.lstrip().startswith(".."):
            end = rt.literal_block_end(lines, i + 1, rt.indent(line))
            if end > i + 1:
                code.append(rt.code_text(lines[i + 1 : end]))
    return Extract(sections, len(code))


# --- docutils --------------------------------------------------------------------------------


class _Parser:
    """docutils' RST parser with quiet settings, optionally with stand-ins for Sphinx's extensions."""

    def __init__(self, sphinx_stand_ins: bool) -> None:
        from docutils import frontend
        from docutils.parsers.rst import Parser

        if sphinx_stand_ins:
            _register_sphinx_stand_ins()
        self.parser = Parser()
        self.settings = frontend.get_default_settings(Parser)
        self.settings.report_level = 5  # keep error nodes in the tree, print nothing
        self.settings.halt_level = 5
        self.settings.warning_stream = io.StringIO()
        self.settings.syntax_highlight = "none"  # no Pygments: the toolkit does not highlight either
        self.settings.file_insertion_enabled = False
        self.settings.raw_enabled = False

    def extract(self, text: str) -> Extract:
        from docutils import nodes, utils

        doc = utils.new_document("<rst>", self.settings)
        self.parser.parse(text, doc)
        errors = sum(1 for m in doc.findall(nodes.system_message) if m["level"] >= 3)
        sections = sum(1 for _ in doc.findall(nodes.section))
        # An error message quotes the offending source as a literal block: not code of the page.
        code = sum(1 for n in doc.findall(nodes.literal_block) if not isinstance(n.parent, nodes.system_message))
        return Extract(sections, code, errors)


def _register_sphinx_stand_ins() -> None:
    from docutils import nodes
    from docutils.parsers.rst import Directive, directives, roles

    class AnyOptions(dict):
        """Accepts every directive option (":caption:", ":linenos:" ...) as plain text."""

        def __contains__(self, key: object) -> bool:
            return True

        def __getitem__(self, key: str) -> Callable[[str], str]:
            return directives.unchanged

    class Container(Directive):
        """``tabs``, ``toctree``: no argument, so the first content line is not read as one."""

        has_content = True
        option_spec = AnyOptions()

        def run(self) -> list[nodes.Node]:
            node = nodes.container("\n".join(self.content))
            self.state.nested_parse(self.content, self.content_offset, node)
            return [node]

    class TitledContainer(Container):
        """``tab``, ``seealso``, ``only``, ``video``: an argument on the directive line."""

        optional_arguments = 1
        final_argument_whitespace = True

    class CodeTab(Directive):
        has_content = True
        optional_arguments = 1
        final_argument_whitespace = True
        option_spec = AnyOptions()

        def run(self) -> list[nodes.Node]:
            code = "\n".join(self.content)
            return [nodes.literal_block(code, code)]

    def role(name, rawtext, text, lineno, inliner, options=None, content=None):  # docutils' role signature
        return [nodes.literal(rawtext, text)], []

    for name in SPHINX_CONTAINERS:
        directives.register_directive(name, Container)
    for name in SPHINX_TITLED_CONTAINERS:
        directives.register_directive(name, TitledContainer)
    directives.register_directive("code-tab", CodeTab)
    for name in SPHINX_ROLES:
        roles.register_local_role(name, role)


# --- timing ----------------------------------------------------------------------------------


def _total(extract: Callable[[str], Extract], files: list[tuple[str, str]]) -> Extract:
    results = [extract(text) for _, text in files]
    return Extract(*(sum(getattr(r, f) for r in results) for f in ("sections", "code_blocks", "errors")))


def _readers(files: list[tuple[str, str]]) -> None:
    for rel, text in files:
        if rel.startswith("classes/class_"):
            classref.parse_class(text, rel)
        elif rel.startswith(("getting_started/", "tutorials/")):
            rst.parse_page(text, rel)


def main(runs: int = 3) -> dict[str, object]:
    files = corpus_files(config.docs_root())
    plain = _Parser(sphinx_stand_ins=False).extract
    t0 = time.perf_counter()
    plain_total = _total(plain, files)  # once: only its error count matters
    plain_ms = (time.perf_counter() - t0) * 1000

    parser = _Parser(sphinx_stand_ins=True).extract
    results: dict[str, object] = {}
    for name, extract in (("docutils", parser), ("toolkit", toolkit_extract)):
        results[name] = {
            "time": timeit(lambda extract=extract: _total(extract, files), runs=runs, warmup=0),
            **vars(_total(extract, files)),
        }
    readers = timeit(lambda: _readers(files), runs=runs, warmup=0)

    import docutils

    out: dict[str, object] = {
        "files": len(files),
        "megabytes": round(sum(len(t.encode("utf-8")) for _, t in files) / 1e6, 1),
        "docutils_version": docutils.__version__,
        "docutils_plain": {"ms": round(plain_ms, 1), **vars(plain_total)},
        **results,
        "readers": {"time": readers},
    }
    out["speedup"] = round(results["docutils"]["time"].median_ms / results["toolkit"]["time"].median_ms, 1)
    save("rst_parse", out)
    return out


if __name__ == "__main__":
    main()
