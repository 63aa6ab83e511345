"""harness.report.text: markdown escaping and fenced blocks."""

from harness.report.text import md_code_block


def test_md_code_block_cannot_be_closed_by_the_text():
    text = "a ``` b\n````"
    block = md_code_block(text)
    fence = block.split("text", 1)[0]
    assert len(fence) == 5 and block.rstrip().endswith(fence)
