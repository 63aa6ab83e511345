"""The codec floor's row of the per-run accuracy table: its figures taken off a measured pair through
the metric registry (``analysis.floor._codec_values``), shown as a run's own row shows them."""

from __future__ import annotations

from records_testutil import CPU, example

from harness.analysis.floor import _codec_values
from harness.analysis.model import CodecFloorRow
from harness.collect.models import CodecSettings
from harness.metrics.metric import in_order, table_metrics
from harness.report.accuracy import _codec_cells, acc_columns


def test_the_codec_row_shows_a_measured_pair_as_its_own_row_does() -> None:
    res = example(CPU)
    c = next(
        c for c in res.comparisons if c.video is not None and c.audio is not None and not c.bitwise.identical
    )
    values = _codec_values(c.video, c.audio)
    res.codec_floor = CodecFloorRow(key=c.b.key, method="lossless", settings=CodecSettings(), **values)
    shown = dict(zip([id(col) for col in acc_columns()], _codec_cells(res), strict=True))
    for m in table_metrics("video"):  # every video column is measured on the codec, as on the run
        assert shown[id(m)] == m.cell(m.record(c)) != ""
    audio = [m for m in table_metrics("audio") if m.key in CodecFloorRow.model_fields]
    assert audio  # the row holds some audio figures, each as the run's
    for m in audio:
        assert shown[id(m)] == m.cell(m.record(c))
    assert set(values) <= set(CodecFloorRow.model_fields)  # nothing kept that the row has no field for
    assert all(values[m.field] == m.get(c) for m in in_order() if m.modality == "video" and m.field in values)


def test_no_audio_leaves_the_audio_figures_unmeasured() -> None:
    c = next(c for c in example(CPU).comparisons if c.video is not None)
    values = _codec_values(c.video, None)
    assert all(values[m.key] is None for m in in_order() if m.modality == "audio" and m.key in values)
    assert any(m.key in values for m in in_order() if m.modality == "audio")
