from __future__ import annotations

import pytest

from overt.evals.language import language_of


@pytest.mark.parametrize(("text", "language"), [
    ("今日の費用は0.1251ドルです。", "ja"),
    ("ルート別: incident 0.189ドル、triage 0.038ドル", "ja"),
    ("Yesterday you spent $0.227.", "en"),
    ("The deadline is the 25th (締め日).", "en"),
    ("He wrote 「サーバーを再起動しました」 in the log.", "en"),
    ("ｻｰﾊﾞｰを再起動しました", "ja"),
    ("0.1251", ""),
    ("経費精算", ""),
])
def test_the_language_of_a_text(text: str, language: str) -> None:
    assert language_of(text) == language
