"""harness.envinfo: package versions and the one device rule every stage uses."""

from __future__ import annotations

import pytest
import torch

from harness.envinfo import package_version, package_versions, resolve_device
from harness.errors import HarnessError


def test_package_version_of_installed_and_missing_distributions() -> None:
    assert package_version("torch") == package_versions(("torch",))["torch"]
    assert package_version("no-such-distribution-here") is None
    assert "no-such-distribution-here" not in package_versions(("no-such-distribution-here",))


def test_resolve_device_choices_and_errors_name_the_caller() -> None:
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("torch:cpu") == "torch:cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(HarnessError, match=r"^kernels: unknown device 'tpu'"):
        resolve_device("tpu", context="kernels")
    if not torch.cuda.is_available():
        with pytest.raises(
            HarnessError, match=r"^pipeline config: device 'cuda' asked for, but torch sees no"
        ):
            resolve_device("cuda", context="pipeline config")
