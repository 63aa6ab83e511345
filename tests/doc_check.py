"""The doc-check: what README.md and docs/*.md show is what the harness does (tests/test_docs.py).

Fenced blocks, by their tag:

- ``console``: run. A line starting with ``$ `` is a command (bash, in one working folder shared by
  the docs: the venv's ``harness`` first on PATH, the repository's ``scenarios/`` linked in, stdout
  and stderr together); the lines after it, up to the next ``$ ``, are its output. A line of just
  ``...`` matches any lines, ``...`` inside a line any text; numbers are compared with a relative
  tolerance (``REL``, 1 %); trailing whitespace is ignored. The exit status must be 0, or the N of a
  command ending in ``# exit N``.
- a block whose first line is ``# NAME.py`` (or .yaml, .json, ...): written to the working folder as
  NAME, for the console blocks after it.
- ``sh`` / ``bash``: not run. Every ``harness ...`` command line is parsed by the real CLI's click
  parser (the subcommand exists, every option is the command's, values convert, a choice is one of
  its values); every ``make TARGET`` is a Makefile target; every repository path exists.
- ``text``: an excerpt of a report; the line above the fence says where from
  (``<!-- doc-check: from reports/examples/.../report.md -->``) and every line of the block that is
  not ``...`` is a line of that file, in order (``...`` inside a line: any text).
- prose: inline ``harness ...`` commands and repository paths are checked as in ``sh`` blocks;
  every relative link (and ``#anchor``) resolves; no line is over ``MAX_LINE`` characters outside
  tables and code.

Every problem is one line: ``FILE:LINE: what differs``.
"""

from __future__ import annotations

import glob
import math
import re
import shlex
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

REL = 0.01  # numbers in a console block's output: relative tolerance
MAX_LINE = 100  # prose line length (tables and code excepted)
TIMEOUT_S = 300  # one console command
FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)\s*$")
DIRECTIVE = re.compile(r"^<!--\s*doc-check:\s*from\s+(?P<path>\S+)\s*-->\s*$")
FILE_LINE = re.compile(r"^#\s+(?P<name>[\w.-]+\.(?:py|ya?ml|json|toml|txt|cfg))\s*$")
EXIT_COMMENT = re.compile(r"#\s*exit\s+(?P<code>\d+)\s*$")
NUMBER = r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?"
NUMBER_RE = re.compile(NUMBER)
ELLIPSIS = "..."
REPO_DIRS = ("scenarios/", "reports/examples/", "docs/", "harness/", "tests/", ".ci/", ".github/")
PLACEHOLDER = re.compile(r"[<>{}$\[\]|]|\.\.\.")
INLINE_CODE = re.compile(r"(`+)(?P<code>.+?)\1")
LINK = re.compile(r"!?\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
HARNESS_NAMES = ("harness", ".venv/bin/harness")


@dataclass
class Block:
    """A fenced block: its tag, its lines and the line number of the first one (1-based)."""

    doc: str
    line: int
    lang: str
    lines: list[str]
    directive: str | None = None  # the path of a ``<!-- doc-check: from PATH -->`` just above

    @property
    def file_name(self) -> str | None:
        """NAME where the first line is ``# NAME.ext`` (a file the reader writes)."""
        if self.lang in ("console", "text") or not self.lines:
            return None
        m = FILE_LINE.match(self.lines[0])
        return m["name"] if m else None


@dataclass
class Doc:
    """A markdown file split into fenced blocks and prose lines."""

    name: str  # as failures name it: relative to the repository
    path: Path
    lines: list[str]
    blocks: list[Block] = field(default_factory=list)
    prose: list[tuple[int, str]] = field(default_factory=list)  # (line number, text) outside fences


def parse(path: Path, name: str | None = None, text: str | None = None) -> Doc:
    """The blocks and prose of a markdown file (``text``: instead of reading ``path``)."""
    lines = (path.read_text() if text is None else text).splitlines()
    doc = Doc(name or path.name, path, lines)
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            doc.prose.append((i + 1, lines[i]))
            i += 1
            continue
        fence, lang, start = m["fence"], m["lang"], i + 1
        j = start
        while j < len(lines) and lines[j].strip() != fence:
            j += 1
        above = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        d = DIRECTIVE.match(above.strip())
        doc.blocks.append(Block(doc.name, start + 1, lang, lines[start:j], d["path"] if d else None))
        i = j + 1
    return doc


# --- matching output --------------------------------------------------------------------------


@cache
def line_pattern(expected: str, numbers: bool) -> re.Pattern[str]:
    """``expected`` as a regex: ``...`` any text; with ``numbers``, each number a group of its own."""
    parts = []
    for k, piece in enumerate(expected.split(ELLIPSIS)):
        if k:
            parts.append(".*?")
        if not numbers:
            parts.append(re.escape(piece))
            continue
        pos = 0
        for m in NUMBER_RE.finditer(piece):
            parts.append(re.escape(piece[pos : m.start()]) + f"({NUMBER})")
            pos = m.end()
        parts.append(re.escape(piece[pos:]))
    return re.compile("".join(parts))


def number(text: str) -> float:
    return float(text.replace(",", ""))


def line_problem(expected: str, actual: str, rel: float | None = REL) -> str | None:
    """None where ``actual`` reads as ``expected`` (``rel``: numbers within that relative tolerance;
    None: text alone), else what differs."""
    expected, actual = expected.rstrip(), actual.rstrip()
    if expected == actual:
        return None
    m = line_pattern(expected, rel is not None).fullmatch(actual)
    if m is None:
        return "text differs"
    if rel is None:
        return None
    want = [n.group() for n in NUMBER_RE.finditer(expected.replace(ELLIPSIS, "\0"))]
    for w, got in zip(want, m.groups(), strict=True):
        if not math.isclose(number(got), number(w), rel_tol=rel or 0.0, abs_tol=0.0):
            return f"{got} is not {w} (within {100 * (rel or 0):g} %)"
    return None


@dataclass
class Mismatch:
    expected_index: int  # the expected line that did not match (len(expected): output left over)
    actual_index: int
    why: str


def match_lines(expected: list[str], actual: list[str], rel: float | None = REL) -> Mismatch | None:
    """None where the output lines read as the expected ones (a line of just ``...``: any lines), else
    the furthest point any alignment reached and why it stopped there."""
    best: list[Mismatch] = []
    seen: set[tuple[int, int]] = set()

    def rank(m: Mismatch) -> tuple[int, int, int]:
        # the furthest expected line; there, a line that differs only in a number, then in text, then
        # the end of the output; the earliest output line
        kind = 0 if m.why == "output ended" else 1 if m.why in ("text differs", "output goes on") else 2
        return m.expected_index, kind, -m.actual_index

    def note(i: int, j: int, why: str) -> None:
        m = Mismatch(i, j, why)
        if not best or rank(m) > rank(best[0]):
            best[:] = [m]

    def go(i: int, j: int) -> bool:
        if (i, j) in seen:
            return False
        seen.add((i, j))
        if i == len(expected):
            if j == len(actual):
                return True
            note(i, j, "output goes on")
            return False
        if expected[i].strip() == ELLIPSIS:
            return any(go(i + 1, k) for k in range(j, len(actual) + 1))
        if j == len(actual):
            note(i, j, "output ended")
            return False
        why = line_problem(expected[i], actual[j], rel)
        if why is None:
            return go(i + 1, j + 1)
        note(i, j, why)
        return False

    return None if go(0, 0) else best[0]


def clip(text: str, width: int = 160) -> str:
    text = text.rstrip()
    return text if len(text) <= width else text[: width - 3] + ELLIPSIS


# --- console blocks ---------------------------------------------------------------------------


@dataclass
class Command:
    line: int
    text: str
    exit_code: int
    expected: list[tuple[int, str]]  # (line number, text)


def console_commands(block: Block) -> tuple[list[Command], list[str]]:
    """The commands of a console block with their expected output, and its problems."""
    cmds: list[Command] = []
    problems = []
    for k, text in enumerate(block.lines):
        n = block.line + k
        if text.startswith("$ "):
            m = EXIT_COMMENT.search(text)
            cmds.append(Command(n, text[2:].strip(), int(m["code"]) if m else 0, []))
        elif not cmds:
            problems.append(f"{block.doc}:{n}: console output before any `$ ` command")
        else:
            cmds[-1].expected.append((n, text))
    return cmds, problems


def run_command(cmd: Command, cwd: Path, env: dict[str, str]) -> tuple[int, list[str]]:
    """Exit status and output lines (stdout and stderr together, trailing blank lines dropped)."""
    try:
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", cmd.text],
            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            timeout=TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return -1, [f"(timed out after {TIMEOUT_S} s)"]
    out = [re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", line).rstrip() for line in done.stdout.splitlines()]
    while out and not out[-1]:
        out.pop()
    return done.returncode, out


def check_command(doc: str, cmd: Command, cwd: Path, env: dict[str, str]) -> list[str]:
    code, out = run_command(cmd, cwd, env)
    if code != cmd.exit_code:
        last = next((line for line in reversed(out) if line.strip()), "no output")
        return [f"{doc}:{cmd.line}: `{cmd.text}` exited {code}, the doc says {cmd.exit_code}: {clip(last)}"]
    expected = [text for _, text in cmd.expected]
    while expected and not expected[-1].strip():
        expected.pop()
    miss = match_lines(expected, out)
    if miss is None:
        return []
    got = repr(clip(out[miss.actual_index])) if miss.actual_index < len(out) else "the end of the output"
    if miss.expected_index < len(expected):
        n, want = cmd.expected[miss.expected_index]
        return [f"{doc}:{n}: `{cmd.text}`: expected {clip(want)!r}, got {got} ({miss.why})"]
    n = cmd.expected[-1][0] if cmd.expected else cmd.line
    return [f"{doc}:{n}: `{cmd.text}`: the output goes on: {got}"]


def run_doc(doc: Doc, cwd: Path, env: dict[str, str]) -> list[str]:
    """Write the doc's files and run its console blocks, in order, in ``cwd``."""
    problems = []
    for block in doc.blocks:
        if block.file_name:
            (cwd / block.file_name).write_text("\n".join(block.lines) + "\n")
        if block.lang != "console":
            continue
        cmds, found = console_commands(block)
        problems += found
        for cmd in cmds:
            problems += check_command(doc.name, cmd, cwd, env)
    return problems


# --- the CLI, the Makefile, paths -------------------------------------------------------------


def is_usage_error(exc: BaseException) -> bool:
    return any(k.__name__ in ("ClickException", "UsageError") for k in type(exc).__mro__)


def is_path_param(param: Any) -> bool:
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        return bool(desc.is_path or getattr(desc, "is_file", False))
    return type(getattr(param, "type", None)).__name__ in ("Path", "File")


def convert(param: Any, ctx: Any, value: Any) -> None:
    """Convert ``value`` as the command would (typer's runtime coercion, else click's type); a choice
    outside its values raises. Paths are not opened, callbacks not called."""
    if hasattr(param, "get_runtime_param"):
        param.get_runtime_param().coerce(value, param=param, ctx=ctx)
    else:
        param.type_cast_value(ctx, value)


def check_cli(
    root: Any,
    argv: list[str],
    accepted: dict[tuple[str, str], Iterable[str]] | None = None,
    complete: bool = True,
) -> str | None:
    """None where ``harness ARGV`` parses as the CLI would parse it, else what is wrong. ``accepted``:
    values a string option takes that its command checks in code, {(command path, option): values};
    ``complete``: every required argument given (a command line, not a mention in prose)."""
    cmd, path, args, parent = root, ["harness"], list(argv), None
    while True:
        ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent)
        try:
            values, rest, order = cmd.make_parser(ctx).parse_args(args)
        except Exception as exc:
            if not is_usage_error(exc):
                raise
            return f"`{' '.join(path)}`: {' '.join(str(exc.format_message()).split())}"
        if not hasattr(cmd, "commands"):
            break
        if not rest:
            return None  # options of the group alone (--help, --version)
        sub = cmd.get_command(ctx, rest[0])
        if sub is None:
            return f"`{' '.join(path)}` has no command {rest[0]!r}"
        cmd, path, args, parent = sub, [*path, rest[0]], rest[1:], ctx
    if rest:
        return f"`{' '.join(path)}`: unexpected argument(s) {' '.join(rest)}"
    if "--help" in argv:
        return None
    where = " ".join(path[1:])
    for param in cmd.params:
        value = values.get(param.name)
        if value is None:
            if param.required and complete:
                return f"`{' '.join(path)}`: missing {param.opts[-1] if param.opts else param.name}"
            continue
        if is_path_param(param) or not isinstance(value, str | list | tuple):  # a flag
            continue
        shown = value if isinstance(value, str) else " ".join(map(str, value))
        if "$" in shown:
            continue
        try:
            convert(param, ctx, value)
        except Exception as exc:
            if not is_usage_error(exc):
                raise
            return f"`{' '.join(path)}`: {' '.join(str(exc.format_message()).split())}"
        for opt in param.opts:
            allowed = (accepted or {}).get((where, opt))
            if allowed is not None:
                allowed = [str(a) for a in allowed]
                for v in [value] if isinstance(value, str) else value:
                    if v not in allowed:
                        return f"`{' '.join(path)}` {opt}: {v!r} is not one of {', '.join(allowed)}"
    return None


def make_targets(makefile: Path) -> set[str]:
    """The targets a Makefile's rules name (``name:`` at a line's start, not ``name :=``)."""
    found = set()
    for line in makefile.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.][A-Za-z0-9_. -]*?)\s*:(?![=:])", line)
        if m and not line.startswith("\t"):
            found.update(m.group(1).split())
    return found


def words(command_line: str) -> list[list[str]]:
    """The simple commands of a shell line (pipes, lists, redirections and env assignments dropped)."""
    lex = shlex.shlex(command_line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        tokens = list(lex)
    except ValueError:  # an unbalanced quote: not a command line
        return []
    out: list[list[str]] = [[]]
    skip = False
    for tok in tokens:
        if skip:
            skip = False
            continue
        if tok and set(tok) <= set("|&;()"):
            out.append([])
        elif tok and set(tok) <= set("<>"):
            skip = True
            if out[-1] and out[-1][-1].isdigit():  # 2> file
                out[-1].pop()
        elif not out[-1] and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tok):
            continue
        else:
            out[-1].append(tok)
    return [w for w in out if w]


def is_repo_path(word: str) -> bool:
    return word.startswith(REPO_DIRS) and not PLACEHOLDER.search(word.replace("*", ""))


def missing_path(root: Path, word: str) -> bool:
    word = word.rstrip(".,;:")
    if any(c in word for c in "*?"):
        return not glob.glob(str(root / word))
    return not (root / word).exists()


@dataclass
class Checker:
    """The static checks, against one repository and one CLI."""

    root: Path
    cli: Any  # the click command of `harness`
    accepted: dict[tuple[str, str], Iterable[str]] = field(default_factory=dict)
    makefile: Path | None = None

    def command_problems(self, where: str, line: str, complete: bool = True) -> list[str]:
        problems = []
        targets = make_targets(self.makefile) if self.makefile else set()
        for argv in words(line):
            name = argv[0]
            if name in HARNESS_NAMES:
                why = check_cli(self.cli, argv[1:], self.accepted, complete)
                if why:
                    problems.append(f"{where}: {why}")
            elif name == "make":
                for t in argv[1:]:
                    if not t.startswith("-") and "=" not in t and t not in targets:
                        problems.append(f"{where}: `make {t}`: no such target in the Makefile")
            problems += [
                f"{where}: {w} does not exist" for w in argv if is_repo_path(w) and missing_path(self.root, w)
            ]
        return problems

    def sh_block(self, block: Block) -> list[str]:
        problems = []
        pending, start = "", block.line
        for k, text in enumerate(block.lines):
            if not pending:
                start = block.line + k
            if text.rstrip().endswith("\\"):
                pending += text.rstrip()[:-1] + " "
                continue
            line, pending = pending + text, ""
            if line.strip() and not line.lstrip().startswith("#"):
                problems += self.command_problems(f"{block.doc}:{start}", line)
        return problems

    def excerpt(self, block: Block) -> list[str]:
        if block.directive is None:
            return [
                f"{block.doc}:{block.line - 1}: a ```text block needs `<!-- doc-check: from FILE -->` above it"
            ]
        source = self.root / block.directive
        if not source.is_file():
            return [f"{block.doc}:{block.line - 1}: {block.directive} does not exist"]
        have = source.read_text().splitlines()
        j = 0
        for k, want in enumerate(block.lines):
            if want.strip() == ELLIPSIS:
                continue
            while j < len(have) and line_problem(want, have[j], rel=None) is not None:
                j += 1
            if j == len(have):
                return [
                    f"{block.doc}:{block.line + k}: not a line of {block.directive} (after the ones above): {clip(want)!r}"
                ]
            j += 1
        return []

    def prose(self, doc: Doc) -> list[str]:
        problems = []
        in_comment = False
        for n, text in doc.prose:
            where = f"{doc.name}:{n}"
            if len(text) > MAX_LINE and not text.lstrip().startswith("|"):
                problems.append(f"{where}: {len(text)} characters, over {MAX_LINE} (outside tables and code)")
            if "<!--" in text and "-->" not in text:
                in_comment = True
            if in_comment:
                in_comment = "-->" not in text
                continue
            if (text.count("`") - 3 * text.count("```")) % 2:
                problems.append(
                    f"{where}: an inline code span runs over the line's end (keep it on one line)"
                )
            for m in INLINE_CODE.finditer(text):
                code = m["code"].strip()
                if code.startswith(
                    tuple(f"{h} " for h in HARNESS_NAMES) + ("make ",)
                ) and not PLACEHOLDER.search(code):
                    problems += self.command_problems(where, code, complete=False)
                elif is_repo_path(code) and " " not in code and missing_path(self.root, code):
                    problems.append(f"{where}: {code} does not exist")
            for m in LINK.finditer(INLINE_CODE.sub("", text)):
                problems += self.link(doc, where, m["target"])
        return problems

    def link(self, doc: Doc, where: str, target: str) -> list[str]:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            return []
        file, _, anchor = target.partition("#")
        if not file:  # this page
            text = "\n".join(doc.lines)
        else:
            dest = (doc.path.parent / file).resolve()
            if not dest.exists():
                return [f"{where}: link {target}: {file} does not exist"]
            text = dest.read_text() if dest.suffix == ".md" and anchor else ""
        if anchor and anchor not in anchors(text):
            return [f"{where}: link {target}: no heading #{anchor} in {file or doc.name}"]
        return []

    def static(self, doc: Doc) -> list[str]:
        """Every check but running: sh blocks, excerpts, prose, links, line lengths."""
        problems = self.prose(doc)
        for block in doc.blocks:
            if block.lang in ("sh", "bash", "shell"):
                problems += self.sh_block(block)
            elif block.lang == "text":
                problems += self.excerpt(block)
            elif block.lang == "console":
                problems += console_commands(block)[1]
        return problems


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings of a markdown text (duplicates numbered -1, -2, ...)."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    in_fence = None
    for line in markdown.splitlines():
        m = FENCE.match(line)
        if m and (in_fence is None or line.strip() == in_fence):
            in_fence = m["fence"] if in_fence is None else None
            continue
        if in_fence is not None:
            continue
        h = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not h:
            continue
        slug = re.sub(r"[^\w\- ]", "", h.group(1).lower()).replace(" ", "-")
        n = counts.get(slug, 0)
        counts[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def harness_cli() -> Any:
    """The click command behind ``harness`` (typer's app, as typer builds it)."""
    import typer.main

    from harness.cli.program import app

    return typer.main.get_command(app)


def library_choices() -> dict[tuple[str, str], Iterable[str]]:
    """String options whose values their command checks in code, with the values it accepts (read
    from the library where it keeps them)."""
    from harness.records import Role
    from harness.registry import EXECUTORS
    from harness.runners.diffusers.checkpoint import SIZES
    from harness.runners.diffusers.schema import SYNTHETIC_MODELS
    from harness.runners.lightx2v.checkpoint import PRESETS

    return {
        ("run", "--executor"): EXECUTORS.names(),
        ("compare", "--format"): ("table", "md", "json"),  # checked in harness.cli.compare
        ("compare", "-f"): ("table", "md", "json"),
        ("ingest", "--role"): [r.value for r in Role],
        ("bench metrics", "--device"): ("cpu", "cuda", "auto"),
        ("diffusers tiny-checkpoint", "--model"): SYNTHETIC_MODELS,
        ("diffusers tiny-checkpoint", "--preset"): SIZES,
        ("lightx2v tiny-checkpoint", "--preset"): PRESETS,
    }


def docs_of(root: Path) -> list[Path]:
    """README.md, then docs/*.md: the order their console blocks run in."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]
