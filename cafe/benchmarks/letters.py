"""The shared letter rule of MMSU's and AIR-Bench's official scripts: the letter a reply gives
(letter_of), where one script's reading departs from it (LetterRule), and what an official file's
row holds (its choice fields; MISSING, the response key absent). Read by the benchmarks' rule
(letter_rule.py) and by the scripts' reading of a file (letter_rule_files.py)."""

from __future__ import annotations

from dataclasses import dataclass

LETTERS = "ABCD"
CHOICE_FIELDS = ("choice_a", "choice_b", "choice_c", "choice_d")

#: a row of an official file without the response key (told apart from a null response)
MISSING = object()


@dataclass(frozen=True)
class LetterRule:
    """Where one official script's reading of a reply departs from the shared letter rule."""

    empty_excluded: bool  # "" / "None": left out of the denominator (else counted wrong)
    non_string_stops: bool  # a null / non-string reply stops the script (else it is dropped)
    missing_stops: bool  # a row without the response key stops it (else it reads as "")
    first_gold: bool  # the gold letter is the first option equal to answer_gt, the script
    # stopping when none is (else: any letter whose option text equals answer_gt is right)
    #: a breakdown whose cell with no scored reply stops the script's summary (None: none does)
    empty_cell_stops: str | None = None
    #: the script parses each line unguarded and reads the fields it needs with [] (AIR-Bench):
    #: a line that does not parse, or a row without them, stops it (cafe.benchmarks.
    #: letter_rule_files); else every field has a default and a broken line is skipped (MMSU)
    strict_lines: bool = False

    def excluded_text(self) -> str:
        """The replies besides format failures that the script leaves out, for labels."""
        out = ", empty and 'None' replies" if self.empty_excluded else ""
        return out + ("" if self.non_string_stops else ", null and non-string replies")


def letter_of(response: str | None) -> str | None:
    """The official script's letter: "" for an empty or "None" reply, the letter A-D, or None
    for a format failure."""
    if response is None:
        return ""
    text = response.strip().replace("\n", "")
    if not text or text == "None":
        return ""
    if text[0] in LETTERS:
        return text[0]
    if len(text) >= 2 and text[-2] in LETTERS:
        return text[-2]
    return None
