"""SAKURA (ckyang1124/SAKURA): multi-hop audio reasoning, 4 tracks (Animal, Emotion, Gender,
Language) x 500 clips, each clip asked a single-hop and a multi-hop question (4,000 MCQ).

Layout: ``data/<Track>/metadata.json`` maps the clip path (relative to the dataset root, e.g.
``data/Animal/audio/dog28.wav``) to attribute_label, {single,multi}_instruction and
{single,multi}_answer; the options are written inside the instruction ("... (a) dog (b) crow"),
the answer is "(x) text" (300 Emotion answers start with a space). ``--data`` is the dataset root,
its ``data`` folder (the track folders), one track's metadata.json, or a local Hugging Face copy
(SLLM-multi-hop/<Track>QA: parquet or save_to_disk; columns file, audio, attribute_label, ...).

Each clip gives two samples, ``<Track>-<clip>-single`` and ``<Track>-<clip>-multi``; the question
is the instruction before its options, the inline options become the choices, the answer the
lettered option's text. The official rule is an LLM judge (`cafe judge-official`); until one is
run the "official" section reports a deterministic option match, labelled as not the official
figure."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cafe.benchmarks.base import (
    Benchmark,
    ExportFormat,
    LoadedBenchmark,
    OfficialFile,
    by_meta,
)
from cafe.jsontext import bad_text, loads_line
from cafe.parsing import split_options
from cafe.records import InputError, Prediction, Problem, Sample

TRACKS = ("Animal", "Emotion", "Gender", "Language")
HOPS = ("single", "multi")
#: the one release (metadata last changed 2025-05-13): each track file's sha256
KNOWN_SHA256 = {
    "914c511ff75c2150c821f37178ffb11a38288e3c91c0d48d3f06f8e189413078": ("Animal", "v1"),
    "4fbc78c259139428cf94068645bb0806c07481cd63764a882c67f46e8a4a22b5": ("Emotion", "v1"),
    "3ebe06357b186a1704aac3a2899567190f7f5b6aec17ba862e964444f43b44b2": ("Gender", "v1"),
    "c90091cc799415e61b574043b3b7e3defbc9a1f3dc090f1942520e5e09cff8ad": ("Language", "v1"),
}
#: per track, hash of the sorted [clip file name, instructions, answers] rows: identifies the
#: version where the bytes differ (a Hugging Face copy, re-serialised JSON)
KNOWN_CONTENT = {
    "bd4327e5cd4c0d035bffa64384232cf2eb227e4ad23056f6d699bebebc983412": ("Animal", "v1"),
    "a7fb98b5b9fac144c5a6e3acbd31110510f65020b23063902e2c009335ad1ed1": ("Emotion", "v1"),
    "c6674b5d43fea1127f7e5edba5450daf291183eeddbf598e52a03419b0f3bbea": ("Gender", "v1"),
    "17d02efad63beb5feaad9104d4e07eb90e881cc82c0c338a77e5d18b3cde8131": ("Language", "v1"),
}
FIELDS = ("single_instruction", "single_answer", "multi_instruction", "multi_answer")
_ANSWER = re.compile(r"\s*\(([a-z])\)\s*(.*?)\s*", re.DOTALL)


def track_of(text: str) -> str | None:
    """The track a path names (a folder Animal/, AnimalQA/, a clip path data/Animal/...)."""
    for part in reversed(Path(text.replace("\\", "/")).parts):
        for t in TRACKS:
            if part.lower() in (t.lower(), f"{t.lower()}qa"):
                return t
    return None


def content_fingerprint(rows: dict[str, dict[str, Any]]) -> str:
    items = sorted(
        json.dumps([Path(k).name, *(str(v.get(f)) for f in FIELDS)], ensure_ascii=False)
        for k, v in rows.items()
        if isinstance(v, dict)  # a row that is no object is a Problem of its own
    )
    return hashlib.sha256("\n".join(items).encode("utf-8", "surrogatepass")).hexdigest()


def _clip_rel(key: str, track: str) -> str:
    """A metadata key as a path relative to the track folder: ``data/Animal/audio/x.wav`` ->
    ``audio/x.wav`` (keys not in that form are used as given)."""
    k = key.replace("\\", "/")
    for prefix in (f"data/{track}/", f"{track}/"):
        if k.startswith(prefix):
            return k[len(prefix) :]
    return k


class TrackFile:
    """One track's rows (clip key -> fields), where they came from and the folder its clips
    are relative to."""

    def __init__(self, track: str, rows: dict[str, Any], source: str, base: Path,
                 sha: str | None, extra_roots: tuple[Path, ...] = ()):  # fmt: skip
        self.track, self.rows, self.source, self.base, self.sha = track, rows, source, base, sha
        self.extra_roots = extra_roots  # clips cafe wrote out of a Hugging Face copy


def _track_files(data: Path) -> list[TrackFile]:
    """Every track found at ``data`` (official layout, one file, or a Hugging Face copy)."""
    from cafe.benchmarks import hf_copy
    from cafe.benchmarks.metadata import sha256_file

    if not data.exists():
        raise InputError(Problem(str(data), "sakura data not found"))
    if data.is_file() and data.suffix == ".json":
        files = [data]
    else:
        files = []
        for root in (data / "data", data):
            files = [f for t in TRACKS if (f := root / t / "metadata.json").is_file()]
            if files:
                break
    out: list[TrackFile] = []
    for f in files:
        track = track_of(str(f.parent))
        if track is None:
            raise InputError(Problem(str(f), f"names no SAKURA track ({', '.join(TRACKS)})"))
        try:
            rows = loads_line(f.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError) as e:  # not UTF-8, not JSON, nested too deep
            raise InputError(Problem(str(f), f"cannot read SAKURA metadata ({e})")) from None
        if not isinstance(rows, dict):
            raise InputError(Problem(str(f), "not a SAKURA metadata file (one JSON object: "
                                     "clip path -> fields)"))  # fmt: skip
        out.append(TrackFile(track, rows, str(f), f.parent, sha256_file(f)))
    if out:
        return out
    # a Hugging Face copy: one folder (or parquet file) per track, or one track's own
    candidates = []
    if data.is_dir():  # SLLM-multi-hop/<Track>QA folders side by side
        candidates = sorted(
            d for d in data.iterdir() if d.is_dir() and track_of(d.name) and hf_copy.is_hf_copy(d)
        )
    if not candidates and hf_copy.is_hf_copy(data):
        candidates = [data]
    for c in candidates:
        rows_list, base, _ = hf_copy.load_rows(c, "audio_path")
        keyed: dict[str, Any] = {}
        track = track_of(str(c))
        for row in rows_list:
            if not isinstance(row, dict):
                continue
            key = str(row.get("file") or row.get("audio_path") or "")
            track = track or track_of(key)
            keyed[key] = row
        if track is None:
            raise InputError(Problem(str(c), f"names no SAKURA track ({', '.join(TRACKS)})"))
        out.append(TrackFile(track, keyed, str(c), base, None, (hf_copy.audio_dir(c),)))
    if not out:
        raise InputError(Problem(str(data), "no SAKURA metadata (data/<Track>/metadata.json) "
                                 "or Hugging Face copy here"))  # fmt: skip
    return out


def _version(tf: TrackFile) -> str | None:
    hit = KNOWN_SHA256.get(tf.sha or "") or KNOWN_CONTENT.get(content_fingerprint(tf.rows))
    return hit[1] if hit and hit[0] == tf.track else None


def load(
    data: str | Path, version: str | None = None, audio_root: str | None = None
) -> LoadedBenchmark:
    from cafe.audio import contained_audio

    root = Path(data).expanduser()
    tracks = _track_files(root)
    problems: list[Problem] = []
    seen_tracks: set[str] = set()
    versions = set()
    samples: list[Sample] = []
    for tf in tracks:
        if tf.track in seen_tracks:
            problems.append(Problem(tf.source, f"a second {tf.track} track: ignored"))
            continue
        seen_tracks.add(tf.track)
        versions.add(_version(tf))
        # --audio-root: the dataset root the keys (data/<Track>/audio/...) are relative to
        base = Path(audio_root).expanduser() if audio_root else None
        for key, row in tf.rows.items():
            samples += _clip_samples(tf, key, row, base, problems, contained_audio)
    detected = versions.pop() if len(versions) == 1 else None
    if detected is None:
        problems.append(Problem(str(root), "unknown file hash: version recorded as 'unknown' "
                                "(pass --version to name it)"))  # fmt: skip
    elif version and version != detected:
        problems.append(Problem(str(root), f"content identifies version {detected!r}; recorded "
                                f"as {version!r} as asked"))  # fmt: skip
    ver = version or detected or "unknown"
    for s in samples:
        s.version = ver
    digest = "\n".join(f"{tf.track} {tf.sha}" for tf in sorted(tracks, key=lambda t: t.track))
    sha = (
        tracks[0].sha
        if len(tracks) == 1
        else hashlib.sha256(digest.encode()).hexdigest()
        if all(t.sha for t in tracks)
        else None
    )
    return LoadedBenchmark(samples, ver, str(root), sha, problems)


def _clip_samples(tf, key, row, base, problems, contained_audio) -> list[Sample]:  # type: ignore[no-untyped-def]
    """The single- and multi-hop samples of one clip (errors noted on the sample, never
    raised)."""
    key_bad, row_bad = bad_text(key), bad_text(row)
    if key_bad or row_bad:  # named in escapes: the key itself may not be printable
        field, why = ("file", key_bad[1]) if key_bad else row_bad  # type: ignore[misc]
        shown = key.encode("ascii", "backslashreplace").decode()
        problems.append(Problem(tf.source, f"{why}; clip left out", shown, field or None))
        return []
    stem = Path(key.replace("\\", "/")).stem or key
    if not isinstance(row, dict):
        problems.append(Problem(tf.source, "not a JSON object", key))
        return []
    audio: list[str] = []
    audio_error = None
    if base is not None:
        value, roots = row.get("audio_path") or key, [base]
    else:
        value, roots = row.get("audio_path") or _clip_rel(key, tf.track), [tf.base]
    named = "audio_path" if row.get("audio_path") is not None else "file"
    path, outside = contained_audio(value, [*roots, *tf.extra_roots], file=tf.source,
                                    sample_id=key, field=named)  # fmt: skip
    if outside is not None:
        audio_error = outside.message
    else:
        audio = [str(path)]
    out = []
    for hop in HOPS:
        sid = f"{tf.track}-{stem}-{hop}"
        errors: list[tuple[str, str]] = [(named, audio_error)] if audio_error else []
        instruction = row.get(f"{hop}_instruction")
        raw_answer = row.get(f"{hop}_answer")
        question, choices, answer = "", [], None
        split = split_options(instruction) if isinstance(instruction, str) else None
        if split is None:
            errors.append((f"{hop}_instruction", "missing field" if instruction is None
                           else "no inline options (a) (b) ..."))  # fmt: skip
        else:
            question, choices = split
        m = _ANSWER.fullmatch(raw_answer) if isinstance(raw_answer, str) else None
        if m is None:
            errors.append((f"{hop}_answer", "missing field" if raw_answer is None
                           else f"not '(x) option' ({raw_answer!r})"))  # fmt: skip
        elif choices:
            idx = ord(m.group(1)) - ord("a")
            if idx >= len(choices) or choices[idx] != m.group(2):
                errors.append((f"{hop}_answer", "answer is not among the choices"))
            else:
                answer = choices[idx]
        quirks = ["answer has surrounding spaces"] if m and raw_answer != raw_answer.strip() else []
        meta = {
            "file": key,
            "track": tf.track,
            "hop": hop,
            "track_hop": f"{tf.track}/{hop}",
            "attribute_label": row.get("attribute_label"),
            "instruction": instruction,
            "answer_raw": raw_answer,
            **({"gender": row["gender"]} if "gender" in row else {}),
            **({"quirks": quirks} if quirks else {}),
        }
        for f, msg in errors:
            problems.append(Problem(tf.source, msg, sid, f))
        out.append(
            Sample(
                id=sid, bench="sakura", version="", question=question, choices=choices,
                answer=answer if answer is not None or not isinstance(raw_answer, str)
                else raw_answer,
                audio=audio, meta=meta,
                error="; ".join(f"{f}: {msg}" for f, msg in errors) or None,
            )
        )  # fmt: skip
    return out


def option_match(text: str | None, answer: str, choices: list[str]) -> bool:
    """The deterministic stand-in for SAKURA's judge: the answer maps to exactly one option
    (its text or its letter) and that option is the answer. NOT the official figure."""
    from cafe.parsing import extract_answer

    choice, status = extract_answer(text, list(choices))
    return status == "ok" and choice == answer


#: evaluation/llm_judge.py's reading of a judge reply (extract_judgement): case-sensitive, dot
#: matches newlines, the first match; calculate_acc.py counts an item right only when the captured
#: judgement, lowercased and stripped, is "correct"
OFFICIAL_REPLY = re.compile(r"Explanation: (.*?)\nJudgement: (.*?)(?:\n\n|$)", re.DOTALL)
#: the system message the judge gets (ours; the official script sends one of its own)
JUDGE_SYSTEM = (
    "You grade answers to multiple-choice questions. You are given a question with its "
    "options, the correct answer and a model's reply, and you decide whether the reply is right."
)


def official_judgement(reply: str | None) -> str | None:
    """The judgement the official script extracts from a judge reply, or None where its pattern
    does not match (it records "No extracted judgement": counted wrong). The reply as it came,
    thinking and all: the script's first match may be a judgement inside a <think> block (the
    lenient reading, beside it, reads the final answer)."""
    m = OFFICIAL_REPLY.search(reply or "")
    return m.group(2) if m else None


#: llm_judge.py's placeholder for the label, filled after the response is put in the prompt
LABEL_PLACEHOLDER = "[GROUND_TRUTH_ANSWER]"


def label(sample: Sample) -> Any:
    """The label as saved ("(b) dog", spaces kept), its letter that of the answer among the
    choices as shown: an item whose options were reordered (--permute-choices) is judged
    against the letter it showed."""
    raw = sample.meta.get("answer_raw")
    m = _ANSWER.fullmatch(raw) if isinstance(raw, str) else None
    if m is None or sample.answer not in sample.choices:
        return raw
    at = ord(m.group(1)) - ord("a")
    if at < len(sample.choices) and sample.choices[at] == sample.answer:
        return raw  # the letter still shows the answer (the original order)
    shown = chr(ord("a") + sample.choices.index(sample.answer))
    return raw[: m.start(1)] + shown + raw[m.end(1) :]


def official_response(sample: Sample, response: str) -> str:
    """The response as llm_judge.py's prompt builder leaves it: it fills the response in first
    and the label after, so a response holding the label's placeholder shows the judge the
    label there."""
    return response.replace(LABEL_PLACEHOLDER, str(label(sample) or sample.answer))


def thought_first(reply: str | None) -> bool:
    """Whether a reply's thinking block holds the judgement the official pattern reads first,
    and the answer after it another (counted beside the official figure)."""
    from cafe.clients.thinking import final_answer

    final = final_answer(reply)
    if not reply or final == reply:
        return False
    m = OFFICIAL_REPLY.search(final)
    return official_judgement(reply) != (m.group(2) if m else None)


def judged_correct(judgement: str | None) -> bool:
    """calculate_acc.py's rule: right only when the judgement is "correct" (any case, spaces
    around); "incorrect", anything else or no judgement counts wrong."""
    return judgement is not None and judgement.lower().strip() == "correct"


OFFICIAL_LABEL = (
    "official: the judge's reply read with the official pattern 'Explanation: ...\\nJudgement: "
    "...' (case-sensitive), right only when the judgement is 'correct'; unmatched replies count "
    "wrong; null responses (the official script crashes on them) and items without a prediction "
    "are in no denominator (counted beside)"
)
LENIENT_LABEL = (
    "lenient judgement: the reply's last 'Judgement:'/'Judgment:' label in any case or markup, "
    "'right' as 'correct'; NOT the official figure (the official pattern scores those replies "
    "wrong); same denominator as the official figure"
)
COUNTED_WRONG_LABEL = (
    "counted wrong: the official reading, with null responses and items without a prediction "
    "counted wrong in the denominator; NOT the official figure"
)
OPTION_MATCH_LABEL = (
    "option match: the answer mapped to exactly one option (its text or letter) equals the "
    "answer; deterministic, NOT the official figure (SAKURA's official rule is an LLM judge: "
    "`cafe judge-official RUN`)"
)


class SAKURA(Benchmark):
    """SAKURA: breakdowns track, hop and track x hop (the paper's table); the average is the
    mean of the four tracks."""

    name = "sakura"
    breakdowns = by_meta("track", "hop", "track_hop")
    prediction_keys = ("response", "model_output", "prediction")
    # the official judge's input: one JSON per track x hop (write_results), the whole response
    export_format = ExportFormat(
        "response", "file", default_field="raw", unanswered=None,
        writer=lambda triples, out: write_results(triples, out),
    )  # fmt: skip
    official_rule = (
        "LLM judge (gpt-4o-2024-11-20, temperature 0, top_p 0.9, no max_tokens): its reply read "
        "with the official pattern 'Explanation: ...' then 'Judgement: ...' (case-sensitive, "
        "first match), right only when the judgement is 'correct'; unmatched replies count "
        "wrong; per track x hop, average = mean of the 4 tracks"
    )
    licence = "none stated (research use; audio keeps its sources' terms)"
    version_items = {"v1": 4000}
    default_prompt_style = "sakura"  # the instruction with its inline options, as is
    accuracy_label = OPTION_MATCH_LABEL

    @property
    def official_judge(self) -> Any:
        from cafe.benchmarks.official_judge import VerdictSpec

        # the official request: temperature 0, top_p 0.9, no max_tokens sent; the instruction
        # with its inline options and the label exactly as saved (leading space kept)
        return VerdictSpec(
            name="sakura-judge",
            template=Path(__file__).with_name("templates") / "sakura_judge.txt",
            model="gpt-4o-2024-11-20",
            temperature=0.0,
            top_p=0.9,
            max_tokens=None,
            system=JUDGE_SYSTEM,
            fields=lambda s: {
                "question": s.meta.get("instruction") or s.question,
                "answer": label(s) or s.answer or "",
            },
            reader=official_judgement,
            output_form=official_response,
        )

    def load(self, data: str | None = None, version: str | None = None) -> LoadedBenchmark:
        from cafe.benchmarks.metadata import default_data

        if data is None:
            data = str(default_data("sakura"))
        return load(data, version, self.audio_root)

    def is_correct(self, prediction: str | None, answer: str, choices: list[str]) -> bool:
        return option_match(prediction, answer, choices)

    def read_official_file(self, path: Path, samples: list[Sample]) -> OfficialFile | None:
        return read_results(path, samples)

    def official_section(
        self, samples: list[Sample], predictions: list[Any], runs: int | None = None, **judged: Any
    ) -> dict[str, Any]:
        from cafe.benchmarks.official import answered, tally

        def matched(s: Sample, p: Prediction | None) -> bool:
            return option_match(answered(p), s.answer or "", s.choices)

        breakdowns = dict(self.breakdowns)
        variants = {"option_match": {"label": OPTION_MATCH_LABEL, **_figures(tally(
            samples, predictions, matched, breakdowns, runs))}}  # fmt: skip
        verdicts = judged.get("verdicts")
        if verdicts is None:
            headline: dict[str, Any] = {
                "label": "official rule (LLM judge): not run; `cafe judge-official RUN` runs it",
                "total": None,
            }
            return {"rule": self.official_rule, "headline": headline, "variants": variants}
        # calculate_acc.py counts every entry of a judgements file, clips the data lacks too
        known = {s.id for s in samples}
        file_only = sorted({k[0] for k, v in verdicts.items()
                            if v.source == JUDGEMENTS_FILE and k[0] not in known})  # fmt: skip
        samples = [*samples, *(_entry_sample(sid) for sid in file_only)]
        from_file = {k for k, v in verdicts.items() if v.source == JUDGEMENTS_FILE}
        kept_out = {n: [k for k in keys if k not in from_file]  # calculate_acc counts them
                    for n, keys in _kept_out(samples, predictions, runs).items()}  # fmt: skip
        out = set(kept_out["null_response"]) | set(kept_out["not_in_predictions"])

        def reading(read: Callable[[Any], bool], outside: bool | None) -> Any:
            def verdict(s: Sample, p: Prediction | None) -> bool | None:
                v = verdicts.get((s.id, p.run_index if p is not None else 0))
                if v is not None and v.source == JUDGEMENTS_FILE:  # calculate_acc.py counts
                    return read(v)  # every entry, whatever its model_response
                if p is None or (s.id, p.run_index) in out:
                    return outside
                # only a reply is read (a failed call has none): counted wrong, and said
                return v is not None and v.status in ("ok", "unparseable") and read(v)

            return verdict

        def official(v: Any) -> bool:
            if v.source == JUDGEMENTS_FILE:  # calculate_acc.py's rule on the stored judgement
                return judged_correct(v.value if isinstance(v.value, str) else None)
            return judged_correct(official_judgement(v.raw))

        def lenient(v: Any) -> bool:
            from cafe.benchmarks.official_judge import read_judgement

            return read_judgement(v.raw) is True

        failed = sum(v.status == "failed" for k, v in verdicts.items() if k not in out)
        label = f"{OFFICIAL_LABEL}; judge {judged.get('judge')}"
        if failed:  # a call that failed is no verdict: counted wrong here, and said
            label += f"; {failed} judge calls failed (counted wrong; run it again to retry)"
        figures = _figures(tally(samples, predictions, reading(official, None), breakdowns, runs))
        if not figures["total"]["total"]:  # 0 of 0 is no figure
            label = "absent: no judged item with a response; " + label
            figures["total"] = None
        live = {k: v for k, v in verdicts.items() if k not in out and v.source != JUDGEMENTS_FILE}
        thought = sorted(k[0] for k, v in live.items() if thought_first(v.raw))
        if thought:
            label += (f"; {len(thought)} replies judged inside their thinking first (read as "
                      "the official pattern's first match)")  # fmt: skip
        headline = {"label": label, **figures, "kept_out": {
            "null_response": len(kept_out["null_response"]),
            "not_in_predictions": len(kept_out["not_in_predictions"]),
            "null_response_items": sorted({k[0] for k in kept_out["null_response"]})},
            "judged_in_thinking_first": len(thought),
            **({"row_cases": {"entries for clips absent from the data (counted, as "
                              "calculate_acc.py counts every entry)": len(file_only)}}
               if file_only else {})}  # fmt: skip
        stops = judged.get("stops") or []
        if stops:  # calculate_acc.py stops on them: no official figure, the rest beside it
            from cafe.benchmarks.official import without_stops

            headline["stopped"] = {"count": len(stops), "items": [w for w, _ in stops],
                                   "reasons": dict(Counter(why for _, why in stops))}  # fmt: skip
            variants.update(without_stops(headline))
        variants["lenient_judgement"] = {"label": LENIENT_LABEL, **_figures(tally(
            samples, predictions, reading(lenient, None), breakdowns, runs))}  # fmt: skip
        variants["counted_wrong"] = {"label": COUNTED_WRONG_LABEL, **_figures(tally(
            samples, predictions, reading(official, False), breakdowns, runs))}  # fmt: skip
        return {"rule": self.official_rule, "headline": headline, "variants": variants}


def _entry_sample(sid: str) -> Sample:
    """The item a judgements file's entry for a clip the data lacks is counted as: its track and
    hop (read from the id, ``<Track>-<clip>-<hop>``), no question of its own."""
    track, hop = sid.split("-", 1)[0], sid.rsplit("-", 1)[-1]
    meta = {"track": track, "hop": hop, "track_hop": f"{track}/{hop}", "file": sid}
    return Sample(id=sid, bench="sakura", version="", question="", choices=[], answer="",
                  audio=[], meta=meta)  # fmt: skip


def _kept_out(
    samples: list[Sample], predictions: list[Any], runs: int | None
) -> dict[str, list[tuple[str, int]]]:
    """The (item, run) pairs the official script cannot score: a null response (its prompt
    building crashes on one) and pairs with no prediction (in no results file: no
    denominator)."""
    from cafe.benchmarks.official import run_ids

    by_key = {(p.sample_id, p.run_index): p for p in predictions}
    null, absent = [], []
    for s in samples:
        if s.answer is None:
            continue
        for r in run_ids(predictions, runs):
            p = by_key.get((s.id, r))
            if p is None:
                absent.append((s.id, r))
            elif p.raw_output is None or p.error is not None:
                null.append((s.id, r))
    return {"null_response": null, "not_in_predictions": absent}


def _figures(t: dict[str, Any]) -> dict[str, Any]:
    """The tally with SAKURA's averages: per hop and overall, the mean of the four tracks."""
    from cafe.benchmarks.official import mean_of

    cells = t["breakdowns"]["track_hop"]
    t["average"] = {
        hop: mean_of({k: c for k, c in cells.items() if k.endswith(f"/{hop}")}) for hop in HOPS
    }
    t["average"]["all"] = mean_of(t["breakdowns"]["track"])
    return t


# the official judge's files ----------------------------------------------------------------------
#: what llm_judge.py writes for a reply its pattern does not match
NO_JUDGEMENT = "No extracted judgement"
#: the source of a verdict read from llm_judge.py's output (its stored Judgement is the value)
JUDGEMENTS_FILE = "judgements file"


def write_results(
    triples: list[tuple[Sample, dict[str, Any], str | None]], out: Path
) -> list[Path]:
    """The official judge's input, one file per track x hop in the folder ``out``
    (``<Track>_<hop>.json``: {"attribute", "type", "results": {clip path: {"instruction",
    "response", "label"}}}), the instruction with its options and the label as saved. An item
    without a response is left out: the official script crashes on a null one, and an item not
    in the file is in no denominator, as cafe's official figure keeps it out."""
    from cafe.store import write_json_atomic

    files: dict[tuple[str, str], dict[str, Any]] = {}
    for s, _, value in triples:
        track, hop = s.meta.get("track"), s.meta.get("hop")
        doc = files.setdefault((track, hop), {"attribute": track, "type": hop, "results": {}})
        if value is not None:
            doc["results"][s.meta.get("file") or s.id] = {
                "instruction": s.meta.get("instruction"), "response": value,
                "label": label(s)}  # fmt: skip
    from cafe.safe_files import safe_dir

    safe_dir(out)
    written = []
    for (track, hop), doc in sorted(files.items(), key=lambda kv: str(kv[0])):
        written.append(out / f"{track}_{hop}.json")
        write_json_atomic(written[-1], doc)
    return written


def _result_files(path: Path) -> list[Path]:
    return sorted(path.glob("*.json")) if path.is_dir() else [path]


def read_results(path: Path, samples: list[Sample]) -> OfficialFile | None:
    """SAKURA's official files as prediction items: the judge's input ({"results": {clip path:
    {"instruction", "response", "label"}}}, one per track x hop) or its output (the same keys
    with "Explanation", "Judgement" and "model_response": its verdicts come along); a file or a
    folder of them. None where ``path`` is a single file of another layout (a JSON list /
    JSONL of items). The item is the clip's track (the file's "attribute", else the path) and
    hop (the file's "type", else the item whose instruction it repeats)."""
    docs = []
    for f in _result_files(path):
        try:
            doc = loads_line(f.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            doc = None
        except ValueError as e:  # nested too deep for the parser: no results file's shape
            raise InputError(Problem(str(f), f"not a SAKURA results file ({e})")) from None
        if isinstance(doc, dict) and isinstance(doc.get("results"), dict):
            docs.append((f, doc))
    if not docs:
        if path.is_dir():
            raise InputError(Problem(str(path), "no SAKURA results file here (JSON with "
                                     "{\"results\": {clip path: {...}}})"))  # fmt: skip
        return None
    hops = {(s.meta.get("track"), Path(str(s.meta.get("file"))).stem, s.meta.get("instruction")):
            s.meta.get("hop") for s in samples}  # fmt: skip
    known = {s.id for s in samples}
    out = OfficialFile(rows=[])
    verdicts: dict[tuple[str, int], Any] = {}
    stops: list[tuple[str, str]] = []
    judge = None
    for f, doc in docs:
        rows, found = _doc_rows(f, doc, hops, out.problems, stops)
        if not any(r["id"] in known for r in rows) and rows:
            first = rows[0]
            why = (
                f"no results key names a SAKURA item: a key is read as the clip path "
                f"data/<Track>/audio/<clip>.wav with the file's 'type' (single / multi), "
                f"e.g. {first['_key']!r} -> {first['id']!r}, which the data does not hold"
            )
            raise InputError(Problem(str(f), why))
        out.rows += rows
        verdicts.update(found)
        judge = judge or doc.get("judge_model")
    if verdicts or stops:
        out.judged = {"verdicts": verdicts, "judge": f"{judge or 'a judge'} (judgements file)",
                      "stops": stops}  # fmt: skip
    return out


def _name_hop(f: Path) -> str | None:
    """The hop a results file's name gives (``<Track>_<hop>.json``, llm_judge.py's output
    ``<Track>_<hop>_judgements.json``), else None."""
    stem = f.stem.removesuffix("_judgements")
    hop = stem.rsplit("_", 1)[-1].lower()
    return hop if hop in HOPS else None


def _doc_rows(f: Path, doc: dict[str, Any], hops: dict[Any, Any], problems: list[Problem],
              stops: list[tuple[str, str]]
              ) -> tuple[list[dict[str, Any]], dict[tuple[str, int], Any]]:  # fmt: skip
    """One results file's items (id, response) and the verdicts of a judgements file (an entry
    whose Judgement is missing or not text: calculate_acc.py stops on it, added to ``stops``).
    The hop is the file's "type", else its name's, else the item whose instruction it repeats:
    llm_judge.py's output has no "type" and calculate_acc.py reads no instruction."""
    from cafe.benchmarks.official_judge import Judged

    attribute = str(doc.get("attribute") or "")
    file_track = next((t for t in TRACKS if t.lower() == attribute.lower()), None)
    file_hop = doc.get("type") if doc.get("type") in HOPS else _name_hop(f)
    judgements = any(isinstance(e, dict) and "Judgement" in e for e in doc["results"].values())
    rows, verdicts = [], {}
    for key, entry in doc["results"].items():
        if not isinstance(entry, dict):
            problems.append(Problem(str(f), "not a JSON object", key, "results"))
            continue
        found = bad_text(entry)  # nested too deep, a NUL, a lone surrogate
        if found is not None:
            problems.append(Problem(str(f), f"{found[1]}; entry left out", key, found[0] or None))
            continue
        instruction = entry.get("instruction")
        if instruction is not None and not isinstance(instruction, str):
            problems.append(Problem(str(f), f"a string expected, not {type(instruction).__name__}"
                                    "; entry left out", key, "instruction"))  # fmt: skip
            continue
        track = file_track or track_of(key)
        stem = Path(key.replace("\\", "/")).stem
        hop = file_hop or hops.get((track, stem, instruction))
        if track is None or hop is None:
            problems.append(Problem(str(f), "names no SAKURA track / hop (the file has no "
                                    "'attribute' / 'type' and the path or instruction names "
                                    "none)", key, "results"))  # fmt: skip
            continue
        sid = f"{track}-{stem}-{hop}"
        response_key = "response" if "response" in entry else "model_response"
        rows.append({"id": sid, "_key": key, **({"response": entry[response_key]}
                                                 if response_key in entry else {})})  # fmt: skip
        if judgements and not isinstance(entry.get("Judgement"), str):
            what = "no Judgement" if "Judgement" not in entry else "a Judgement that is not text"
            stops.append((f"{key} ({f.name})", f"{what}: calculate_acc.py stops"))
        if "Judgement" in entry:
            j = entry["Judgement"]
            ok = isinstance(j, str) and j != NO_JUDGEMENT
            raw = f"Explanation: {entry.get('Explanation', '')}\nJudgement: {j}" if ok else ""
            verdicts[(sid, 0)] = Judged(sid, 0, None, "ok" if ok else "unparseable", raw,
                                        source=JUDGEMENTS_FILE, value=j)  # fmt: skip
    return rows, verdicts
