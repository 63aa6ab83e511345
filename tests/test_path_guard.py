"""The one path guard (harness.safe_write): a name from a record resolves under its destination
folder or is refused in one line (exit 3) before anything is written; names sanitised by
``file_name`` are always plain file names; a campaign's folders that are symbolic links are never
written through."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.analysis.frames import slug
from harness.errors import Exit
from harness.safe_write import (
    UnsafePathError,
    atomic_write_text,
    file_name,
    is_plain_name,
    refuse_linked_folders,
    resolve_under,
)

FIELD = "results.json insitu.readings[0].heatmap"


def snapshot(folder: Path) -> list[tuple[str, bytes | None]]:
    """Every path under ``folder`` with its bytes (None for folders): what 'untouched' compares."""
    return sorted(
        (p.relative_to(folder).as_posix(), p.read_bytes() if p.is_file() else None) for p in folder.rglob("*")
    )


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "keep.txt").write_text("keep")
    return folder


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    folder = tmp_path / "reports" / "camp"
    folder.mkdir(parents=True)
    (folder / "campaign.json").write_text("{}")
    return folder


def test_a_name_under_the_root_resolves_there(tmp_path):
    assert (
        resolve_under(tmp_path, "assets/frames/a_f0001.png", FIELD) == tmp_path / "assets/frames/a_f0001.png"
    )


@pytest.mark.parametrize(
    "rel",
    ["../escape.png", "assets/../../escape.png", "assets/..", "/tmp/absolute.png", "", ".", "a\x00b.png",
     "insitu_heatmap_../../../escape.png"],
)  # fmt: skip
def test_a_name_that_leaves_the_root_is_refused_in_one_line_naming_the_field(tmp_path, rel):
    root = tmp_path / "camp"
    with pytest.raises(UnsafePathError) as err:
        resolve_under(root, rel, FIELD)
    line = str(err.value)
    assert FIELD in line and "\n" not in line, line
    assert err.value.exit_code == Exit.RUN_FAILED
    assert not root.exists()  # refused before anything was made


def test_a_symlinked_folder_under_the_root_is_refused(campaign, outside):
    (campaign / "assets").symlink_to(outside)
    with pytest.raises(UnsafePathError, match=r"assets: a symbolic link"):
        resolve_under(campaign, "assets/x.png", "figure x")


@pytest.mark.parametrize("linked", ["metrics", "assets", "assets/frames"])
def test_a_write_into_a_campaign_through_a_linked_folder_is_refused(campaign, outside, linked):
    (campaign / linked).parent.mkdir(parents=True, exist_ok=True)
    (campaign / linked).symlink_to(outside)
    before = snapshot(outside)
    with pytest.raises(UnsafePathError, match=linked):
        atomic_write_text(campaign / linked / "new" / "x.json", "{}")
    with pytest.raises(UnsafePathError, match=linked):
        atomic_write_text(campaign / linked / "keep.txt", "overwritten")
    assert snapshot(outside) == before


def test_a_dangling_link_where_a_campaign_folder_goes_is_refused(campaign, tmp_path):
    (campaign / "metrics").symlink_to(tmp_path / "not-yet")
    with pytest.raises(UnsafePathError, match="metrics"):
        atomic_write_text(campaign / "metrics" / "hashes.json", "{}")
    assert not (tmp_path / "not-yet").exists()


def test_the_campaign_folder_itself_may_be_a_link(tmp_path, campaign):
    link = tmp_path / "link"
    link.symlink_to(campaign)  # reports/<scenario>/latest -> a campaign: the user's own choice
    atomic_write_text(link / "assets" / "a.txt", "x")
    assert (campaign / "assets" / "a.txt").read_text() == "x"


def test_a_write_outside_any_campaign_is_not_checked_for_links(tmp_path, outside):
    (tmp_path / "pages").symlink_to(outside)  # --out given as a link: the user's own folder
    atomic_write_text(tmp_path / "pages" / "report.md", "x")
    assert (outside / "report.md").read_text() == "x"


def test_refuse_linked_folders_names_the_deepest_link_before_anything_is_written(campaign, outside):
    (campaign / "runs" / "arm").mkdir(parents=True)
    (campaign / "runs" / "arm" / "insitu").symlink_to(outside)
    with pytest.raises(UnsafePathError, match=r"runs/arm/insitu: a symbolic link") as err:
        refuse_linked_folders(campaign)
    assert "\n" not in str(err.value)
    refuse_linked_folders(campaign / "runs" / "other")  # no folder: nothing to refuse


@pytest.mark.parametrize(
    ("name", "expected"),
    [("arm_s43", "arm_s43"), ("sage_emul_thuml", "sage_emul_thuml"), ("../../escape", "_._.._escape"),
     ("..", "_."), (".hidden", "_hidden"), ("", "_"), ("/etc/passwd", "_etc_passwd"), ("a b\x00c", "a_b_c")],
)  # fmt: skip
def test_file_name_keeps_plain_names_and_makes_others_plain(name, expected):
    assert file_name(name) == expected


def test_slug_is_a_plain_file_name_too():
    assert slug("arm@43") == "arm_s43" and slug("../x@2") == "_._x_s2"


def test_a_long_name_is_cut_and_keeps_a_hash_of_the_whole():
    a, b = file_name("x" * 300 + "a"), file_name("x" * 300 + "b")
    assert len(a) <= 120 and len(b) <= 120 and a != b


# The property: whatever text a record holds, the guard never gives a path outside its root.
_ROOT = Path(tempfile.mkdtemp(prefix="path-guard-"))
(_ROOT / "camp" / "assets").mkdir(parents=True)
(_ROOT / "outside").mkdir()
(_ROOT / "camp" / "linked").symlink_to(_ROOT / "outside")
_PIECES = st.sampled_from(["..", ".", "", "a", "assets", "linked", "/", "b.png", "~", "\\..", "\x00", "é"])
NAMES = st.one_of(
    st.text(), st.lists(_PIECES, max_size=8).map("/".join), st.lists(_PIECES, max_size=8).map("".join)
)


def _inside(path: Path, root: Path) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top + os.sep)


@settings(max_examples=400, deadline=None)
@given(NAMES)
def test_no_text_resolves_outside_the_root(name):
    root = _ROOT / "camp"
    try:
        path = resolve_under(root, name, "a field")
    except UnsafePathError as err:
        assert "\n" not in str(err)
        return
    assert _inside(path, root) and _inside(path.parent, root) and path != root
    assert PurePosixPath(name).parts[0] != "linked"  # the link at the top is never gone through


@settings(max_examples=400, deadline=None)
@given(NAMES)
def test_a_sanitised_name_is_one_plain_file_name_under_the_root(name):
    plain = file_name(name)
    assert plain and plain == file_name(plain) and not plain.startswith(".") and "/" not in plain
    assert is_plain_name(plain)
    if not is_plain_name(name):
        assert plain != name  # a name that is not plain is always changed
    elif len(name) <= 120:
        assert plain == name  # a plain one is kept as it is
    assert resolve_under(_ROOT / "camp", f"assets/{plain}.png", "a field").parent == _ROOT / "camp" / "assets"


def test_op_names_of_an_in_situ_record_are_read_as_plain_names_and_lines_beside_their_meta(tmp_path):
    """A hostile meta (an op named '../../escape', a rank that climbs out) read back: the op, the
    primary and every line's errors under the plain name, the rank's lines from beside its meta."""
    from harness.attention.insitu.recorder import read_insitu
    from harness.insitu_records import InSituCall, InSituMeta, InSituOp, InSituOpError
    from harness.store import write_record

    folder = tmp_path / "runs" / "arm" / "insitu"
    folder.mkdir(parents=True)
    (tmp_path / "runs" / "elsewhere.jsonl").write_text("not read\n")
    ops = [InSituOp(name="../../escape", role="primary", attn_type="torch_sdpa", exact=True),
           InSituOp(name="cand", role="shadow", attn_type="sage_emul_thuml")]  # fmt: skip
    write_record(
        folder / "rank0.meta.json", InSituMeta(rank="../../elsewhere", primary="../../escape", ops=ops)
    )
    err = InSituOpError(cosine=1.0, rel_l1=0.01, rmse=0.1, max_abs=0.1, row_cos_p1=1.0, row_cos_p10=1.0)
    call = InSituCall(call=1, step=1, block=0, batch=1, heads=1, q_len=4, k_len=4, head_dim=8, rows=4,
                      elements=32, ref_l1=1.0, errors={"../../escape": err, "cand": err})  # fmt: skip
    (folder / "rank0.jsonl").write_text(call.model_dump_json() + "\n")
    run = read_insitu(folder)
    assert run is not None and run.op_names() == ["_._.._escape", "cand"] and run.primary == "_._.._escape"
    assert len(run.calls) == 1 and set(run.calls[0].errors) == {"_._.._escape", "cand"}
    assert any("'../../escape' is not a plain name: read as '_._.._escape'" in n for n in run.notes), (
        run.notes
    )
