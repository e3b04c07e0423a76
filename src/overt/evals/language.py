"""Which language an answer is written in, for a case's ``answer_language``.

Only what the eval needs: English or Japanese. Quoted text (``「…」``,
``"…"``, ``“…”``, ```…```) is left out, since an answer may quote a note or a
name in the other language. What is left is Japanese when its kana (the
hiragana and katakana that carry Japanese grammar and loanwords) are at least
as many as its Latin words, and English when it has Latin words and fewer kana:
``claude-sonnet-4が一番高いです`` is Japanese, ``The deadline is the 25th
(締め日)`` English. Kanji alone decide nothing (Chinese shares them).
"""

from __future__ import annotations

import re
import unicodedata

_QUOTED = re.compile(r"「[^」]*」|『[^』]*』|\"[^\"]*\"|“[^”]*”|`[^`]*`")
_KANA = re.compile(r"[\u3041-\u309f\u30a0-\u30ff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
_NOT_A_KANA = "\u30fb\u30fc"  # ・ and ー also stand between Latin words


def language_of(text: str) -> str:
    """``ja``, ``en``, or ``""`` when the text has neither kana nor Latin words."""
    bare = _QUOTED.sub(" ", unicodedata.normalize("NFKC", text))
    kana = sum(1 for c in _KANA.findall(bare) if c not in _NOT_A_KANA)
    words = len(_LATIN_WORD.findall(bare))
    if kana and kana >= words:
        return "ja"
    if words:
        return "en"
    return ""
