from __future__ import annotations

import numpy as np
import torch
from skimage.transform import resize

from harness.tiny_ref2av.model import AUDIO_CH, VIDEO_CH
from harness.tiny_ref2av.run import (
    PAD_ID,
    audio_target,
    fit_reference,
    fnv1a64,
    load_reference,
    tokenize,
    video_target,
)


def test_fnv1a64_reference_values():
    # Published FNV-1a 64-bit test vectors.
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8


def test_tokenize_is_deterministic_padded_and_prompt_dependent():
    a = tokenize("a dancer on a street", 32)
    assert a.dtype == torch.int64 and a.shape == (32,)
    assert torch.equal(a, tokenize("a dancer on a street", 32))
    assert not torch.equal(a, tokenize("a dancer on a beach", 32))
    n_real = len("a dancer on a street") - 2
    assert (a[:n_real] != PAD_ID).all() and (a[n_real:] == PAD_ID).all()
    assert tokenize("x" * 100, 8).shape == (8,)
    assert (tokenize("", 4) == PAD_ID).all()


def test_fit_reference_matches_scikit_image_resize():
    img = load_reference("astronaut")
    assert img.dtype == np.uint8 and img.shape == (512, 512, 3)
    ours = fit_reference(img, 128, 224).permute(1, 2, 0).numpy()
    assert ours.shape == (128, 224, 3) and ours.min() >= 0 and ours.max() <= 1
    # Independent path: same centre crop, scikit-image's antialiased resize.
    ch = round(512 * 128 / 224)
    y0 = (512 - ch) // 2
    ref = resize(img[y0 : y0 + ch] / 255.0, (128, 224), order=1, anti_aliasing=True)
    corr = np.corrcoef(ours.ravel(), ref.ravel())[0, 1]
    assert corr > 0.99
    assert np.abs(ours - ref).mean() < 0.02


def test_targets_shapes_and_content():
    ref = torch.rand(3, 4, 7)
    tv = video_target(ref, 5, "prompt")
    assert tv.shape == (5, 4, 7, VIDEO_CH)
    torch.testing.assert_close(tv[2, ..., 0:3], (ref * 2 - 1).permute(1, 2, 0))
    assert tv[..., 3:5].abs().max() > 0.3  # a sway is asked for
    assert not torch.equal(tv[0, ..., 3], tv[-1, ..., 3])  # and it moves
    assert not torch.equal(tv, video_target(ref, 5, "another prompt"))
    ta = audio_target(40, 1.0, "prompt")
    assert ta.shape == (40, AUDIO_CH) and torch.isfinite(ta).all()
    assert torch.equal(ta, audio_target(40, 1.0, "prompt"))
