"""What every `harness` command shares: consoles, one-line errors, comma lists, groups, and ``run_app``
(outcomes -> exit codes). Only command-line libraries are imported here: ``--help`` stays fast."""

from __future__ import annotations

import errno
import signal
import sys

import typer
from rich.console import Console

from harness.errors import EXIT_CODES_HELP, Exit, HarnessError, UsageError, visible

out = Console()
err = Console(stderr=True)


def say_err(text: str) -> None:
    """One plain line on stderr (never wrapped or styled: it is grepped)."""
    print(visible(text), file=sys.stderr, flush=True)


_SAID_INTERRUPTED = False  # a command said how it was interrupted: run_app adds nothing


def say_interrupted(text: str) -> None:
    """The command's own line for an interruption (exit 130 follows); replaces the bare 'interrupted'."""
    global _SAID_INTERRUPTED
    _SAID_INTERRUPTED = True
    say_err(text)


def print_paths(paths) -> None:
    """``label: path`` lines of a report's (or a kernels run's) files."""
    for label, path in paths.items():
        print(f"{label}: {path}")  # plain: paths are copied, never wrapped


def fail_on_report_errors(paths) -> None:
    """Each problem of a written report on its own ``error:`` line; exit 3 when there is one."""
    for problem in paths.errors:
        say_err(f"error: {problem}")
    if paths.errors:
        raise typer.Exit(Exit.RUN_FAILED)


def waiting_line(campaign, then: str):
    """``on_wait`` for a campaign's writer lock: one line naming whom the command waits for."""

    def say(holder) -> None:
        say_err(f"waiting: a harness {holder.writer} holds {campaign} ({holder.describe()}); {then} when it "
                "ends (Ctrl-C stops waiting)")  # fmt: skip

    return say


def parse_csv(value: str | None) -> list[str] | None:
    """``--arms a,b``: the names, blanks dropped; None when the flag is absent or empty."""
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def parse_names(value: str | None, flag: str) -> list[str] | None:
    """``--arms a,b``: the names (None: absent); no name, or one twice, is a usage error (never "all")."""
    if value is None:
        return None
    items = parse_csv(value)
    if not items:
        raise UsageError(f"{flag}: no name given in {value!r} (expected e.g. torch_sdpa or torch_sdpa,floor)")
    twice = sorted({n for n in items if items.count(n) > 1})
    if twice:
        raise UsageError(f"{flag}: {twice[0]!r} given twice in {value!r}")
    return items


def parse_seeds(value: str | None) -> list[int] | None:
    """--seeds 1,2,3: integers (range checked with the plan); anything else is a usage error."""
    items = parse_csv(value)
    if value is not None and not items:
        raise UsageError(f"--seeds: no seed given in {value!r} (expected e.g. 42 or 42,43)")
    seeds = []
    for item in items or ():
        try:
            seeds.append(int(item, 10))
        except ValueError:
            raise UsageError(f"--seeds: {item!r} is not an integer (expected e.g. 42 or 42,43)") from None
    return seeds or None


def need_subcommand(ctx: typer.Context) -> None:
    """A group called alone: one usage line, exit 2 (typer's no_args_is_help differs by version)."""
    if ctx.invoked_subcommand is None and not ctx.resilient_parsing:
        names = ", ".join(sorted(ctx.command.list_commands(ctx)))
        raise UsageError(f"{ctx.command_path}: a command is required (one of: {names}; see --help)")


def group(help_text: str, **options) -> typer.Typer:
    """A command group that states the exit codes and requires a subcommand."""
    app = typer.Typer(invoke_without_command=True, help=help_text, epilog=EXIT_CODES_HELP, **options)
    app.callback()(need_subcommand)
    return app


_SIGNALLED = False  # SIGINT or SIGTERM arrived while the command ran


def _interrupt(signum, frame):
    """Ctrl-C and SIGTERM become KeyboardInterrupt (runs recorded, not lost), and are remembered: raised
    inside a C extension's callback, the interrupt comes out wrapped in that extension's error."""
    global _SIGNALLED
    _SIGNALLED = True
    raise KeyboardInterrupt


def is_click_error(exc: BaseException) -> bool:
    """A usage error from click or typer's copy of it (by class name along the MRO)."""
    return any(k.__name__ == "ClickException" for k in type(exc).__mro__) and hasattr(exc, "format_message")


def run_app(app: typer.Typer, args: list[str] | None, prog_name: str, handled: set[int]) -> None:
    """Run ``app`` and exit with its outcome's code (``handled``: signals ``cli_startup`` took)."""
    signal.signal(signal.SIGTERM, _interrupt)
    if signal.SIGINT in handled or signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    try:
        rc = app(args=args, prog_name=prog_name, standalone_mode=False)
        if isinstance(rc, int) and rc:
            raise typer.Exit(rc)  # a bare 130: click turned Ctrl-C or SIGTERM into it, said below
    except HarnessError as e:
        say_err(f"error: {' '.join(str(e).split())}")
        sys.exit(int(e.exit_code))
    except KeyboardInterrupt:
        say_err("interrupted")
        sys.exit(Exit.INTERRUPTED)
    except typer.Exit as e:
        if e.exit_code == Exit.INTERRUPTED and not _SAID_INTERRUPTED:
            say_err("interrupted")
        sys.exit(int(e.exit_code))
    except (ImportError, OSError) as e:  # a dependency missing; disk full, read-only, no permission
        line = missing_dependency_line(e) if isinstance(e, ImportError) else None
        if isinstance(e, OSError) and e.errno in ENVIRONMENT_ERRNOS:  # the machine's: no space, read-only
            line = f"error: {f'{e.filename}: ' if e.filename else ''}{e.strerror or e}"
        if line is None:
            _internal_error(e)
        say_err(line)
        sys.exit(Exit.RUN_FAILED)
    except Exception as e:
        # An interruption another library wrapped in its own error (click's Abort for Ctrl-C): not a bug
        if _SIGNALLED or type(e).__name__ == "Abort":
            say_err("interrupted")
            sys.exit(Exit.INTERRUPTED)
        if is_click_error(e):
            where = getattr(getattr(e, "ctx", None), "command_path", None) or "harness"  # click's own words
            say_err(f"error: {where}: {' '.join(str(e.format_message()).split())}")  # type: ignore[attr-defined]
            sys.exit(Exit.BAD_INPUT)
        _internal_error(e)


# The harness's own dependencies (pyproject.toml): import name -> (what users call it, distribution).
DEPENDENCIES = {
    **{name: (name, name) for name in "soundfile numba pandas matplotlib pydantic safetensors".split()},
    "av": ("PyAV", "av"),
    "cv2": ("OpenCV", "opencv-python-headless"),
    "skimage": ("scikit-image", "scikit-image"),
    "scipy": ("SciPy", "scipy"),
    "numpy": ("NumPy", "numpy"),
    "torch": ("PyTorch", "torch"),
    "yaml": ("PyYAML", "pyyaml"),
    "jinja2": ("Jinja2", "jinja2"),
}


def missing_dependency_line(e: ImportError) -> str | None:
    """The one line for a dependency that cannot be imported; None for any other (a bug)."""
    name = (e.name or "").split(".")[0]
    if name not in DEPENDENCIES:  # raised inside the package's own __init__: name it by that module
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        name = str(tb.tb_frame.f_globals.get("__name__", "")).split(".")[0] if tb is not None else ""
    if name not in DEPENDENCIES:
        return None
    label, dist = DEPENDENCIES[name]
    if isinstance(e, ModuleNotFoundError) and (e.name or "").split(".")[0] == name:
        return f"error: {label} is not installed (the harness needs it): pip install {dist}"
    why = " ".join(str(e).split())[:300]
    return f"error: {label} is installed but cannot be imported ({why}): pip install --force-reinstall {dist}"


def _internal_error(e: BaseException) -> None:
    import traceback

    traceback.print_exc()
    say_err(f"error: internal error in harness (a bug; the traceback is above): {type(e).__name__}: {e}")
    sys.exit(Exit.INTERNAL)


ENVIRONMENT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG, errno.ELOOP, errno.EIO}
)
