"""What the harness sets up inside a LightX2V process: relaxed checks only for a synthetic checkpoint."""

from __future__ import annotations

import pytest

from harness.runners.lightx2v.rank_env import SyntheticCheckpointError, relax_synthetic_checks


def test_relaxed_checks_are_refused_without_the_synthetic_marker(tmp_path):
    (tmp_path / "text_encoder").mkdir()
    with pytest.raises(SyntheticCheckpointError, match="no synthetic-checkpoint marker; refusing"):
        relax_synthetic_checks(tmp_path)


# A pinned SageAttention2 inside a LightX2V process: the real LightX2V binds `sageattn` at import;
# the harness binds the function the install runs and records what it is. The real package
# imports on the CPU (its Triton kernels compile only when called).
PROBE = """
import json, sys
from harness.runners.lightx2v import rank_env
rank_env.prepare_platform()
import lightx2v.common.ops.attn.sage_attn
before = rank_env.bound_sage_function()
bound = rank_env.bind_pinned_function()
flavour = rank_env.sageattention_flavour(sys.modules["sageattention"])
print(json.dumps({"before": before, "bound": bound, "now": rank_env.bound_sage_function(),
                  "flavour": flavour, "identity": rank_env.sageattention_identity(flavour)}))
"""


def test_a_pinned_sageattention2_runs_its_triton_function_in_lightx2v(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from harness import sage_packages as sp
    from harness.runners.lightx2v.command import HARNESS_IMPORT_ROOT
    from harness.runners.lightx2v.rank_env import flavour_folder
    from harness.store import sha256_file

    root = os.environ.get("LIGHTX2V_ROOT")
    tarball = Path(HARNESS_IMPORT_ROOT).parent / "shared" / "vendor" / "sageattention-d1a57a5.tar.gz"
    if not root or not tarball.is_file():
        pytest.skip("needs the pinned LightX2V (LIGHTX2V_ROOT) and SageAttention2 source")
    sp.install_sageattention2(tarball, sha256_file(tarball), tmp_path)
    env = {**os.environ, sp.DIR_ENV: str(tmp_path), "PLATFORM": "cpu"}
    os.environ[sp.DIR_ENV] = str(tmp_path)
    try:
        folder = flavour_folder("sageattention2")
    finally:
        del os.environ[sp.DIR_ENV]
    assert folder == tmp_path / sp.PACKAGES["sageattention2"].folder
    env["PYTHONPATH"] = os.pathsep.join([str(folder), root, str(HARNESS_IMPORT_ROOT)])
    proc = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["before"] == "sageattn"  # no GPU: LightX2V bound the package's dispatcher
    assert got["bound"] == got["now"] == "sageattn_qk_int8_pv_fp16_triton"
    assert got["flavour"] == "sageattention2"
    assert got["identity"] == {
        "sageattention_version": "2.2.0",
        "sageattention_commit": sp.PACKAGES["sageattention2"].commit,
    }
